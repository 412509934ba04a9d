//! cel-go's two-variable comprehensions, which kube offers since 1.32: `all`, `exists`,
//! `existsOne` (or `exists_one`) with an index (or key) and a value variable, and
//! `transformList`, `transformMap`, `transformMapEntry`, each with an optional filter.
//!
//! The cel crate's interpreter binds one variable per comprehension, so each macro expands
//! into a one-variable comprehension over the target's indices (a list's) or keys (a map's),
//! with the target bound once to a name no rule can write and the value variable bound, around
//! each expression the rule wrote, to the target's element at that index or key. The loop
//! steps keep cel-go's shapes (`@result && p`, `@result + [t]`, …), so the interpreter's
//! short cuts for them apply. The map transforms gather their entries in a list (which the
//! interpreter appends to in place) and make the map once at the end, where cel-go inserts
//! into the map as it goes: both take time in proportion to the entries, not their square.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::operators;
use cel::common::ast::{CallExpr, ComprehensionExpr, Expr, ListExpr, LiteralValue};
use cel::common::types::{LIST_TYPE, MAP_TYPE};
use cel::objects::{Key, Map};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{DeclarationError, Env, ExecutionError, IdedExpr, Value};

use super::{error, no_such_overload, overload};

/// The function that lists what a comprehension over a list or a map ranges over: a list's
/// indices, a map's keys. Its name cannot be written in a rule.
pub const ITERATION_KEYS: &str = "@iterationKeys";

/// The map of a list of `[key, value]` pairs, `transformMap`'s result.
const MAP_OF_PAIRS: &str = "@mapOfPairs";

/// The map of all the entries of a list of maps, `transformMapEntry`'s result.
const MAP_OF_MAPS: &str = "@mapOfMaps";

/// The name the target is bound to while a comprehension runs over it.
pub const TARGET: &str = "@__two_var_target__";

/// The accumulator's name, as the standard macros name it; `__result__` is cel-go's older one.
const ACCUMULATOR: &str = "@result";
const OLD_ACCUMULATOR: &str = "__result__";

/// Registers the macros and the internal functions their expansions call.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    for (function, arity, kind) in [
        ("all", 3, Kind::All),
        ("exists", 3, Kind::Exists),
        ("existsOne", 3, Kind::ExistsOne),
        ("exists_one", 3, Kind::ExistsOne),
        ("transformList", 3, Kind::TransformList),
        ("transformList", 4, Kind::TransformList),
        ("transformMap", 3, Kind::TransformMap),
        ("transformMap", 4, Kind::TransformMap),
        ("transformMapEntry", 3, Kind::TransformMapEntry),
        ("transformMapEntry", 4, Kind::TransformMapEntry),
    ] {
        env.add_macro(Macro::receiver(
            function,
            arity,
            move |helper, target, args| expand(kind, helper, target, args).map(Some),
        ))?;
    }
    overload!(iteration_keys, "@iterationKeys", |name, args| {
        match args.first() {
            Some(Value::List(items)) => Ok(Value::List(Arc::new(
                (0..items.len())
                    .map(|index| Value::Int(i64::try_from(index).unwrap_or(i64::MAX)))
                    .collect(),
            ))),
            Some(Value::Map(map)) => Ok(Value::List(Arc::new(
                map.map.keys().cloned().map(Value::from).collect(),
            ))),
            _ => Err(no_such_overload(name)),
        }
    });
    overload!(map_of_pairs, "@mapOfPairs", |name, args| {
        let mut entries = HashMap::new();
        for pair in super::list_arg(name, args, 0)? {
            let Value::List(pair) = pair else {
                return Err(no_such_overload(name));
            };
            let [key, value] = pair.as_slice() else {
                return Err(no_such_overload(name));
            };
            let key: Key = key
                .clone()
                .try_into()
                .map_err(|_| error(name, format!("unsupported key type: {key:?}")))?;
            insert(name, &mut entries, key, value.clone())?;
        }
        Ok(Value::Map(Map {
            map: Arc::new(entries),
        }))
    });
    overload!(map_of_maps, "@mapOfMaps", |name, args| {
        let mut entries = HashMap::new();
        for map in super::list_arg(name, args, 0)? {
            let Value::Map(map) = map else {
                return Err(no_such_overload(name));
            };
            for (key, value) in map.map.iter() {
                insert(name, &mut entries, key.clone(), value.clone())?;
            }
        }
        Ok(Value::Map(Map {
            map: Arc::new(entries),
        }))
    });
    env.add_overload(
        ITERATION_KEYS,
        "@iterationKeys_list",
        vec![LIST_TYPE],
        iteration_keys,
    )?;
    env.add_overload(
        ITERATION_KEYS,
        "@iterationKeys_map",
        vec![MAP_TYPE],
        iteration_keys,
    )?;
    env.add_overload(
        MAP_OF_PAIRS,
        "@mapOfPairs_list",
        vec![LIST_TYPE],
        map_of_pairs,
    )?;
    env.add_overload(MAP_OF_MAPS, "@mapOfMaps_list", vec![LIST_TYPE], map_of_maps)?;
    Ok(())
}

/// Adds `key` to `entries`, which must not hold it yet (by CEL's equality, so `1` and `1u`
/// are the same key).
fn insert(
    name: &str,
    entries: &mut HashMap<Key, Value>,
    key: Key,
    value: Value,
) -> Result<(), ExecutionError> {
    let twin = match &key {
        Key::Int(number) => u64::try_from(*number).ok().map(Key::Uint),
        Key::Uint(number) => i64::try_from(*number).ok().map(Key::Int),
        _ => None,
    };
    if entries.contains_key(&key) || twin.is_some_and(|twin| entries.contains_key(&twin)) {
        let shown = Value::from(key);
        return Err(error(
            name,
            format!("insert failed: key {} already exists", Shown(&shown)),
        ));
    }
    entries.insert(key, value);
    Ok(())
}

/// A key as cel-go prints it in its error.
struct Shown<'a>(&'a Value);

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Value::String(text) => formatter.write_str(text),
            Value::Int(number) => write!(formatter, "{number}"),
            Value::UInt(number) => write!(formatter, "{number}"),
            Value::Bool(truth) => write!(formatter, "{truth}"),
            other => write!(formatter, "{other:?}"),
        }
    }
}

/// Which two-variable macro.
#[derive(Clone, Copy)]
enum Kind {
    All,
    Exists,
    ExistsOne,
    TransformList,
    TransformMap,
    TransformMapEntry,
}

/// Expands `target.<kind>(first, second, …)`.
fn expand(
    kind: Kind,
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    let (first, second) = variables(helper, args)?;
    let Some(range) = target.take() else {
        return Err(helper.new_error(0, "a two-variable comprehension needs a target"));
    };
    let mut rest: Vec<IdedExpr> = args.drain(2..).collect();
    // The value variable, bound around each expression the rule wrote.
    let with_value = |helper: &mut MacroExprHelper<'_>, written: IdedExpr| {
        let target = ident(helper, TARGET);
        let key = ident(helper, &first);
        let element = call(helper, operators::INDEX, vec![target, key]);
        bind(helper, &second, element, written)
    };
    let accu = |helper: &mut MacroExprHelper<'_>| ident(helper, ACCUMULATOR);
    let literal = |helper: &mut MacroExprHelper<'_>, value: LiteralValue| {
        helper.next_expr(Expr::Literal(value))
    };
    let (init, condition, step, result) = match kind {
        Kind::All | Kind::Exists => {
            let all = matches!(kind, Kind::All);
            let predicate = with_value(helper, rest.remove(0));
            let init = literal(helper, LiteralValue::Boolean((all).into()));
            let undecided = if all {
                accu(helper)
            } else {
                let accu = accu(helper);
                call(helper, operators::LOGICAL_NOT, vec![accu])
            };
            let condition = call(helper, operators::NOT_STRICTLY_FALSE, vec![undecided]);
            let fold = if all {
                operators::LOGICAL_AND
            } else {
                operators::LOGICAL_OR
            };
            let accu_now = accu(helper);
            let step = call(helper, fold, vec![accu_now, predicate]);
            (init, condition, step, accu(helper))
        }
        Kind::ExistsOne => {
            let predicate = with_value(helper, rest.remove(0));
            let init = literal(helper, LiteralValue::Int(0.into()));
            let condition = literal(helper, LiteralValue::Boolean(true.into()));
            let (accu_now, one) = (accu(helper), literal(helper, LiteralValue::Int(1.into())));
            let counted = call(helper, operators::ADD, vec![accu_now, one]);
            let unchanged = accu(helper);
            let step = call(
                helper,
                operators::CONDITIONAL,
                vec![predicate, counted, unchanged],
            );
            let (accu_end, one) = (accu(helper), literal(helper, LiteralValue::Int(1.into())));
            let result = call(helper, operators::EQUALS, vec![accu_end, one]);
            (init, condition, step, result)
        }
        Kind::TransformList | Kind::TransformMap | Kind::TransformMapEntry => {
            let filter = (rest.len() == 2).then(|| rest.remove(0));
            let transform = with_value(helper, rest.remove(0));
            let accu_now = accu(helper);
            // Each element appends one item to the accumulated list: the transformed value,
            // a `[key, value]` pair, or a map of entries.
            let item = match kind {
                Kind::TransformMap => {
                    let key = ident(helper, &first);
                    helper.next_expr(Expr::List(ListExpr::new(vec![key, transform])))
                }
                _ => transform,
            };
            let item = helper.next_expr(Expr::List(ListExpr::new(vec![item])));
            let init = helper.next_expr(Expr::List(ListExpr::new(Vec::new())));
            let step = call(helper, operators::ADD, vec![accu_now, item]);
            let step = match filter {
                Some(filter) => {
                    let filter = with_value(helper, filter);
                    let unchanged = accu(helper);
                    call(
                        helper,
                        operators::CONDITIONAL,
                        vec![filter, step, unchanged],
                    )
                }
                None => step,
            };
            let condition = literal(helper, LiteralValue::Boolean(true.into()));
            (init, condition, step, accu(helper))
        }
    };
    let target_now = ident(helper, TARGET);
    let keys = call(helper, ITERATION_KEYS, vec![target_now]);
    let mut loop_over = helper.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: keys,
        iter_var: first,
        iter_var2: None,
        accu_var: ACCUMULATOR.to_owned(),
        accu_init: init,
        loop_cond: condition,
        loop_step: step,
        result,
    })));
    match kind {
        Kind::TransformMap => loop_over = call(helper, MAP_OF_PAIRS, vec![loop_over]),
        Kind::TransformMapEntry => loop_over = call(helper, MAP_OF_MAPS, vec![loop_over]),
        _ => {}
    }
    Ok(bind(helper, TARGET, range, loop_over))
}

/// The two variable names, checked as cel-go checks them.
fn variables(
    helper: &mut MacroExprHelper<'_>,
    args: &[IdedExpr],
) -> Result<(String, String), ParseError> {
    let name = |helper: &MacroExprHelper<'_>, arg: &IdedExpr| match &arg.expr {
        Expr::Ident(name) => Ok(name.clone()),
        _ => Err(helper.new_error(arg.id, "argument must be a simple name")),
    };
    let (Some(first_arg), Some(second_arg)) = (args.first(), args.get(1)) else {
        return Err(helper.new_error(0, "a two-variable comprehension needs two variables"));
    };
    let (first, second) = (name(helper, first_arg)?, name(helper, second_arg)?);
    if first == second {
        return Err(helper.new_error(second_arg.id, format!("duplicate variable name: {first}")));
    }
    for (variable, arg) in [(&first, first_arg), (&second, second_arg)] {
        if variable == ACCUMULATOR || variable == OLD_ACCUMULATOR {
            return Err(
                helper.new_error(arg.id, "iteration variable overwrites accumulator variable")
            );
        }
    }
    Ok((first, second))
}

fn ident(helper: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    helper.next_expr(Expr::Ident(name.to_owned()))
}

fn call(helper: &mut MacroExprHelper<'_>, function: &str, args: Vec<IdedExpr>) -> IdedExpr {
    helper.next_expr(Expr::Call(CallExpr {
        func_name: function.to_owned(),
        target: None,
        args,
    }))
}

/// `body` with `name` bound to `value`: cel-go's `cel.bind`, a comprehension over no
/// elements whose accumulator is the binding.
pub fn bind(
    helper: &mut MacroExprHelper<'_>,
    name: &str,
    value: IdedExpr,
    body: IdedExpr,
) -> IdedExpr {
    let nothing = helper.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let stop = helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into())));
    let step = ident(helper, name);
    helper.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: nothing,
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: name.to_owned(),
        accu_init: value,
        loop_cond: stop,
        loop_step: step,
        result: body,
    })))
}

/// Whether `expression` is `@target[key]`, the element a two-variable comprehension binds its
/// value variable to (which cel-go binds for nothing).
pub fn is_target_element(expression: &IdedExpr) -> bool {
    matches!(&expression.expr, Expr::Call(call)
        if call.func_name == operators::INDEX
            && matches!(call.args.first().map(|target| &target.expr),
                        Some(Expr::Ident(name)) if name == TARGET))
}

/// Whether `comprehension` is a binding made by [`bind`] (or cel-go's `cel.bind` shape):
/// it ranges over an empty list literal, and so only binds its accumulator for its result.
pub fn is_binding(comprehension: &ComprehensionExpr) -> bool {
    matches!(&comprehension.iter_range.expr, Expr::List(list) if list.elements.is_empty())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_true, eval};

    #[test]
    fn two_variable_quantifiers_see_index_and_value() {
        assert_true(&[
            "[1, 2, 3].all(i, v, v == i + 1)",
            "![1, 2, 3].all(i, v, v > i + 1)",
            "{'hello': 'world', 'taco': 'taco'}.exists(k, v, k == v)",
            "!{'a': 'b'}.exists(k, v, k == v)",
            "[1, 2, 4, 8, 16].exists(i, v, v == 8 && i == 3)",
            "[1, 1, 2, 2, 3, 3].existsOne(i, v, i == 2 && v == 2)",
            "![1, 2, 1, 3, 1, 4].existsOne(i, v, i == 1 || v == 1)",
            "{'i': 0, 'j': 1, 'k': 2}.exists_one(i, v, i == 'l' || v == 1)",
            "{'h': ['hello', 'hi'], 'j': ['joke', 'jog']}.all(k, vals, vals.all(v, v.startsWith(k)))",
            "[[1, 2], [3]].all(i, l, l.all(j, w, w > i))",
            "[].all(i, v, false)",
            // One-variable macros of the same names still expand as before.
            "[1, 2].all(x, x > 0) && [1, 2].exists(x, x == 2) && [1].exists_one(x, x == 1)",
        ]);
    }

    #[test]
    fn transforms_build_lists_and_maps() {
        assert_true(&[
            "[1, 2, 3].transformList(i, v, i * v + v) == [1, 4, 9]",
            "[1, 2, 3].transformList(i, v, i % 2 == 0, i * v + v) == [1, 9]",
            "{'greeting': 'hello'}.transformList(k, v, k + '=' + v) == ['greeting=hello']",
            "[1, 2, 3].transformMap(i, v, i * v + v) == {0: 1, 1: 4, 2: 9}",
            "[1, 2, 3].transformMap(i, v, i % 2 == 0, i * v + v) == {0: 1, 2: 9}",
            "{'greeting': 'hello'}.transformMap(k, v, v + '!') == {'greeting': 'hello!'}",
            "{'greeting': 'hello'}.transformMapEntry(k, v, {v: k}) == {'hello': 'greeting'}",
            "[1, 2, 3].transformMapEntry(i, v, v > 1, {v: i}) == {2: 1, 3: 2}",
        ]);
    }

    #[test]
    fn map_transforms_of_many_elements_take_linear_time() {
        let started = std::time::Instant::now();
        assert_true(&[
            "lists.range(20000).transformMap(i, v, v * 2).size() == 20000",
            "lists.range(20000).transformMapEntry(i, v, {string(v): i}).size() == 20000",
        ]);
        // Quadratic copying of 20,000 entries would take minutes.
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn a_duplicate_entry_and_bad_variables_are_errors() {
        let duplicate = eval("{'a': 'x', 'b': 'x'}.transformMapEntry(k, v, {v: k})");
        assert!(
            duplicate
                .as_ref()
                .is_err_and(|error| error.contains("insert failed: key x already exists")),
            "{duplicate:?}"
        );
        for (source, message) in [
            ("[1].all(i, i, true)", "duplicate variable name: i"),
            ("[1].all(i, 1, true)", "argument must be a simple name"),
            (
                "[1].all(__result__, v, true)",
                "iteration variable overwrites accumulator variable",
            ),
        ] {
            let outcome = eval(source);
            assert!(
                outcome.as_ref().is_err_and(|error| error.contains(message)),
                "{source}: {outcome:?}"
            );
        }
    }
}
