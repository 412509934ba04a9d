//! cel-go's sets extension, which kube offers: `sets.contains`, `sets.equivalent` and
//! `sets.intersects` over two lists.

use cel::common::types::LIST_TYPE;
use cel::{DeclarationError, Env, Value};

use super::{list_arg, overload};

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    overload!(contains, "sets.contains", |name, args| {
        let (list, sublist) = (list_arg(name, args, 0)?, list_arg(name, args, 1)?);
        Ok(Value::Bool(sublist.iter().all(|item| list.contains(item))))
    });
    overload!(equivalent, "sets.equivalent", |name, args| {
        let (a, b) = (list_arg(name, args, 0)?, list_arg(name, args, 1)?);
        let equivalent =
            a.iter().all(|item| b.contains(item)) && b.iter().all(|item| a.contains(item));
        Ok(Value::Bool(equivalent))
    });
    overload!(intersects, "sets.intersects", |name, args| {
        let (a, b) = (list_arg(name, args, 0)?, list_arg(name, args, 1)?);
        Ok(Value::Bool(a.iter().any(|item| b.contains(item))))
    });
    let lists = || vec![LIST_TYPE, LIST_TYPE];
    env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        lists(),
        contains,
    )?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        lists(),
        equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        lists(),
        intersects,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::assert_true;

    #[test]
    fn sets_compare_lists_as_sets() {
        assert_true(&[
            "sets.contains([1, 2, 3], [3, 1])",
            "!sets.contains([1, 2], [4])",
            "sets.contains([1], [])",
            "sets.equivalent([1, 2, 2], [2, 1])",
            "!sets.equivalent([1], [1, 2])",
            "sets.intersects([1, 2], [2, 3])",
            "!sets.intersects([1], [])",
        ]);
    }
}
