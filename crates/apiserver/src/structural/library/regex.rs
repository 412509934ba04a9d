//! kube's regex functions: `find` (the first match, or `''`) and `findAll` (every match, or
//! at most `n`; all of them when `n` is negative).

use std::sync::Arc;

use cel::common::types::{INT_TYPE, STRING_TYPE};
use cel::{DeclarationError, Env, Value};

use super::{Outcome, error, no_such_overload, overload, string_arg};

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    overload!(find, "find", |name, args| {
        let (text, pattern) = (string_arg(name, args, 0)?, compile(name, args)?);
        let found = pattern.find(text).map_or("", |found| found.as_str());
        Ok(Value::String(Arc::new(found.to_string())))
    });
    overload!(find_all, "findAll", |name, args| find_all_of(
        name, args, None
    ));
    overload!(find_all_n, "findAll", |name, args| {
        let limit = match args.get(2) {
            Some(Value::Int(limit)) => *limit,
            _ => return Err(no_such_overload(name)),
        };
        find_all_of(name, args, usize::try_from(limit).ok())
    });
    env.add_member_overload(
        "find",
        "string_find_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all_n,
    )?;
    Ok(())
}

/// The pattern in the second argument, compiled.
fn compile(name: &str, args: &[Value]) -> Result<::regex::Regex, cel::ExecutionError> {
    let source = string_arg(name, args, 1)?;
    ::regex::Regex::new(source).map_err(|problem| error(name, format!("{problem}")))
}

fn find_all_of(name: &str, args: &[Value], limit: Option<usize>) -> Outcome {
    let (text, pattern) = (string_arg(name, args, 0)?, compile(name, args)?);
    let found = pattern
        .find_iter(text)
        .take(limit.unwrap_or(usize::MAX))
        .map(|found| Value::String(Arc::new(found.as_str().to_string())))
        .collect();
    Ok(Value::List(Arc::new(found)))
}

#[cfg(test)]
mod tests {
    use super::super::tests::assert_true;

    #[test]
    fn find_and_find_all_search_as_kube_does() {
        assert_true(&[
            "'abc 123'.find('[0-9]+') == '123'",
            "'abc'.find('[0-9]+') == ''",
            "'1 2 3'.findAll('[0-9]') == ['1', '2', '3']",
            "'1 2 3'.findAll('[0-9]', 2) == ['1', '2']",
            "'1 2 3'.findAll('[0-9]', -1) == ['1', '2', '3']",
            "'1 2 3'.findAll('[0-9]', 0) == []",
        ]);
    }
}
