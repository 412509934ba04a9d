//! kube's list functions: `isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`.

use std::cmp::Ordering;

use cel::common::types::{DYN_TYPE, LIST_TYPE};
use cel::{DeclarationError, Env, Value};

use super::{Outcome, error, list_arg, no_such_overload, overload};

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    overload!(is_sorted, "isSorted", |name, args| {
        let items = list_arg(name, args, 0)?;
        for pair in items.windows(2) {
            if compare(name, &pair[0], &pair[1])? == Ordering::Greater {
                return Ok(Value::Bool(false));
            }
        }
        Ok(Value::Bool(true))
    });
    overload!(sum, "sum", |name, args| {
        let items = list_arg(name, args, 0)?;
        let Some((first, rest)) = items.split_first() else {
            return Ok(Value::Int(0));
        };
        rest.iter()
            .try_fold(first.clone(), |total, item| add(name, &total, item))
    });
    overload!(min, "min", |name, args| extreme(name, args, Ordering::Less));
    overload!(max, "max", |name, args| extreme(
        name,
        args,
        Ordering::Greater
    ));
    overload!(index_of, "indexOf", |name, args| {
        let items = list_arg(name, args, 0)?;
        let item = args.get(1).ok_or_else(|| no_such_overload(name))?;
        Ok(position(
            items.iter().position(|candidate| candidate == item),
        ))
    });
    overload!(last_index_of, "lastIndexOf", |name, args| {
        let items = list_arg(name, args, 0)?;
        let item = args.get(1).ok_or_else(|| no_such_overload(name))?;
        Ok(position(
            items.iter().rposition(|candidate| candidate == item),
        ))
    });
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    Ok(())
}

/// The smallest (`Less`) or largest (`Greater`) item; the first of equals.
fn extreme(name: &str, args: &[Value], preferred: Ordering) -> Outcome {
    let items = list_arg(name, args, 0)?;
    let Some((first, rest)) = items.split_first() else {
        return Err(error(name, format!("{name} called on empty list")));
    };
    let mut best = first;
    for item in rest {
        if compare(name, item, best)? == preferred {
            best = item;
        }
    }
    Ok(best.clone())
}

/// Orders two items of one comparable type.
fn compare(name: &str, a: &Value, b: &Value) -> Result<Ordering, cel::ExecutionError> {
    let comparable = matches!(
        (a, b),
        (Value::Int(_), Value::Int(_))
            | (Value::UInt(_), Value::UInt(_))
            | (Value::Float(_), Value::Float(_))
            | (Value::String(_), Value::String(_))
            | (Value::Bool(_), Value::Bool(_))
            | (Value::Bytes(_), Value::Bytes(_))
    );
    match a.partial_cmp(b) {
        Some(ordering) if comparable => Ok(ordering),
        _ => Err(no_such_overload(name)),
    }
}

/// `a + b` for the numbers `sum` adds, without overflow.
fn add(name: &str, a: &Value, b: &Value) -> Outcome {
    match (a, b) {
        (Value::Int(a), Value::Int(b)) => a
            .checked_add(*b)
            .map(Value::Int)
            .ok_or_else(|| error(name, "integer overflow")),
        (Value::UInt(a), Value::UInt(b)) => a
            .checked_add(*b)
            .map(Value::UInt)
            .ok_or_else(|| error(name, "unsigned integer overflow")),
        (Value::Float(a), Value::Float(b)) => Ok(Value::Float(a + b)),
        _ => Err(no_such_overload(name)),
    }
}

/// An index as CEL's `int`, `-1` for none.
fn position(index: Option<usize>) -> Value {
    Value::Int(
        index
            .and_then(|index| i64::try_from(index).ok())
            .unwrap_or(-1),
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_true, eval};

    #[test]
    fn list_functions_answer_as_kube_does() {
        assert_true(&[
            "[1, 2, 2, 3].isSorted()",
            "!['b', 'a'].isSorted()",
            "[].isSorted()",
            "[1, 2, 3].sum() == 6",
            "[1.5, 2.5].sum() == 4.0",
            "[].sum() == 0",
            "[3, 1, 2].min() == 1",
            "['a', 'c', 'b'].max() == 'c'",
            "[1, 2, 1].indexOf(1) == 0",
            "[1, 2, 1].lastIndexOf(1) == 2",
            "[1, 2].indexOf(5) == -1",
        ]);
        assert!(
            eval("[].min()")
                .unwrap_err()
                .contains("min called on empty list")
        );
        assert!(eval("[9223372036854775807, 1].sum()").is_err());
    }
}
