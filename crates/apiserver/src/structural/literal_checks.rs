//! The literal checks kube-apiserver makes when it compiles a rule (since 1.29): a list or map
//! literal whose elements (or keys, or values) are of different types is refused, as cel-go's
//! type checker refuses it in kube's environment (`expected type 'int' but found 'string'`);
//! and a constant argument to `duration`, `timestamp` or `matches` that does not parse is
//! refused (`invalid duration argument`), as cel-go's literal validators refuse it.
//!
//! Types are known here only for literals: an element computed from data is not compared,
//! so a rule is refused only when kube surely refuses it. Literals inside a `format` call
//! are not compared, as kube exempts them.

use cel::common::ast::{EntryExpr, Expr, LiteralValue};
use cel::{Context, Program, Value};

use super::located_error::located;

/// The first literal problem of `program`, in cel-go's words with its position, or `None`.
pub fn literal_error(program: &Program) -> Option<String> {
    let mut found = None;
    visit(program.expression(), false, &mut |expression, in_format| {
        found = mixed_literal(expression, in_format).or_else(|| bad_argument(expression));
        found.is_none()
    });
    found.map(|(id, text)| located(program, id, &text))
}

/// Calls `check` on `expression` and everything under it, with whether it is inside a
/// `format` call, for as long as `check` answers `true`; answers whether it went through.
fn visit(
    expression: &cel::IdedExpr,
    in_format: bool,
    check: &mut impl FnMut(&cel::IdedExpr, bool) -> bool,
) -> bool {
    if !check(expression, in_format) {
        return false;
    }
    match &expression.expr {
        Expr::Call(call) => {
            let in_format = in_format || call.func_name == "format";
            call.target
                .as_deref()
                .into_iter()
                .chain(&call.args)
                .all(|part| visit(part, in_format, check))
        }
        Expr::Select(select) => visit(&select.operand, in_format, check),
        Expr::List(list) => list
            .elements
            .iter()
            .all(|element| visit(element, in_format, check)),
        Expr::Map(map) => map.entries.iter().all(|entry| match &entry.expr {
            EntryExpr::MapEntry(entry) => {
                visit(&entry.key, in_format, check) && visit(&entry.value, in_format, check)
            }
            EntryExpr::StructField(_) => true,
        }),
        Expr::Struct(object) => object.entries.iter().all(|entry| match &entry.expr {
            EntryExpr::StructField(field) => visit(&field.value, in_format, check),
            EntryExpr::MapEntry(_) => true,
        }),
        Expr::Comprehension(comprehension) => [
            &comprehension.iter_range,
            &comprehension.accu_init,
            &comprehension.loop_cond,
            &comprehension.loop_step,
            &comprehension.result,
        ]
        .into_iter()
        .all(|part| visit(part, in_format, check)),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => true,
    }
}

/// A list or map literal with elements of two literal types: the second's id and the error.
fn mixed_literal(expression: &cel::IdedExpr, in_format: bool) -> Option<(u64, String)> {
    if in_format {
        return None;
    }
    match &expression.expr {
        Expr::List(list) => first_mismatch(list.elements.iter()),
        Expr::Map(map) => {
            let entries = || {
                map.entries.iter().filter_map(|entry| match &entry.expr {
                    EntryExpr::MapEntry(entry) => Some(entry),
                    EntryExpr::StructField(_) => None,
                })
            };
            first_mismatch(entries().map(|entry| &entry.key))
                .or_else(|| first_mismatch(entries().map(|entry| &entry.value)))
        }
        _ => None,
    }
}

/// The first element whose literal type differs from the first element's.
fn first_mismatch<'a>(
    mut elements: impl Iterator<Item = &'a cel::IdedExpr>,
) -> Option<(u64, String)> {
    let expected = literal_type(elements.next()?)?;
    elements.find_map(|element| {
        let actual = literal_type(element)?;
        (actual != expected).then(|| {
            (
                element.id,
                format!("expected type '{expected}' but found '{actual}'"),
            )
        })
    })
}

/// The CEL type of a literal, as cel-go names it; `None` for anything else.
fn literal_type(expression: &cel::IdedExpr) -> Option<&'static str> {
    match &expression.expr {
        Expr::Literal(literal) => Some(match literal {
            LiteralValue::Boolean(_) => "bool",
            LiteralValue::Bytes(_) => "bytes",
            LiteralValue::Double(_) => "double",
            LiteralValue::Int(_) => "int",
            LiteralValue::Null => "null_type",
            LiteralValue::String(_) => "string",
            LiteralValue::UInt(_) => "uint",
        }),
        _ => None,
    }
}

/// A constant argument of `duration`, `timestamp` or `matches` that does not parse: the
/// argument's id and the error.
fn bad_argument(expression: &cel::IdedExpr) -> Option<(u64, String)> {
    let Expr::Call(call) = &expression.expr else {
        return None;
    };
    // cel-go checks the call's first argument (the receiver is not one).
    let argument = call.args.first()?;
    let Expr::Literal(LiteralValue::String(text)) = &argument.expr else {
        return None;
    };
    let text: &str = text.inner();
    let parses = match call.func_name.as_str() {
        "duration" if call.target.is_none() => {
            crate::custom::typed_strings::go_duration(text).is_some()
        }
        // As cel-go does, by running the call itself; but Go's parser also takes a comma
        // before the fraction of a second, which the cel crate's does not: not checked.
        "timestamp" if call.target.is_none() => {
            let context = Context::with_env(super::environment().clone());
            text.contains(',')
                || matches!(
                    Value::resolve(expression, &context),
                    Ok(Value::Timestamp(_))
                )
        }
        // Go's `regexp` also reads `\Q...\E` and octal escapes, which the regex crate does not:
        // patterns with them are not checked.
        "matches" => {
            super::go_regex(text).is_ok()
                || text.contains("\\Q")
                || text
                    .as_bytes()
                    .windows(2)
                    .any(|pair| pair[0] == b'\\' && pair[1].is_ascii_digit())
        }
        _ => return None,
    };
    (!parses).then(|| (argument.id, format!("invalid {} argument", call.func_name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(rule: &str) -> Option<String> {
        let program = super::super::environment()
            .compile(rule)
            .expect("the rule compiles");
        literal_error(&program)
    }

    #[test]
    fn mixed_literals_are_refused_in_cel_gos_words() {
        assert_eq!(
            check("self.x in [1, 'a']").as_deref(),
            Some(
                "ERROR: <input>:1:15: expected type 'int' but found 'string'\n | self.x in [1, 'a']\n | ..............^"
            )
        );
        for (rule, message) in [
            (
                "[1, 2.0].size() == 2",
                "expected type 'int' but found 'double'",
            ),
            (
                "{'a': 1, 2: 1}.size() == 2",
                "expected type 'string' but found 'int'",
            ),
            (
                "{'a': 1, 'b': true}.size() == 2",
                "expected type 'int' but found 'bool'",
            ),
            (
                "[1u, 1].size() == 2",
                "expected type 'uint' but found 'int'",
            ),
        ] {
            let found = check(rule);
            assert!(
                found
                    .as_deref()
                    .is_some_and(|found| found.contains(message)),
                "{rule}: {found:?}"
            );
        }
        for rule in [
            "[1, 2, self.x].size() == 3",
            "[self.x, 'a', 1].size() == 3",
            "'%s and %d'.format(['a', 1]) != ''",
        ] {
            assert_eq!(check(rule), None, "{rule}");
        }
    }

    #[test]
    fn constant_arguments_that_do_not_parse_are_refused() {
        assert_eq!(
            check("self.x < duration('1x')").as_deref(),
            Some(
                "ERROR: <input>:1:19: invalid duration argument\n | self.x < duration('1x')\n | ..................^"
            )
        );
        assert!(
            check("self.t > timestamp('yesterday')")
                .is_some_and(|found| found.contains("invalid timestamp argument"))
        );
        assert!(
            check("self.name.matches('[a-z')")
                .is_some_and(|found| found.contains("invalid matches argument"))
        );
        for rule in [
            "self.x < duration('1h30m') && self.t > timestamp('2020-01-01T00:00:00Z')",
            "self.name.matches('^[a-z]+$')",
            "self.x < duration(self.limit)",
            // Go reads these; the regex crate and chrono do not: left to kube's word.
            "self.name.matches('\\\\Q.*\\\\E')",
            "self.name.matches('\\\\101')",
            "self.t > timestamp('2020-01-01T00:00:00,5Z')",
        ] {
            assert_eq!(check(rule), None, "{rule}");
        }
    }
}
