//! What a CEL rule costs to run, counted before it runs so that no rule runs longer than
//! kube-apiserver lets it: at most [`PER_CALL_LIMIT`] for one run of one expression, and
//! [`RUNTIME_BUDGET`] for all the rules of one object (apiserver's `pkg/apis/cel/config.go`).
//!
//! The cel crate has no cost tracking of its own, so the count is made here, from the
//! expression's tree and the values it runs on: one for each node evaluated, and a
//! comprehension's (`all`, `exists`, `map`, `filter`, …) condition and step once for each
//! element of the list or map it ranges over, with its variable bound to that element, so that
//! nested comprehensions are counted for the lists they really see. Within a comprehension a
//! call that works through a list, a map or a string (`in` a list, equality, `+`, string
//! functions) is also charged for its size, as cel-go charges it, so that a loop over a list
//! that searches the list each time costs what it does. This is cel-go's cost model in its
//! shape, not in every weight: cel-go stops an `all` or `exists` at its first decisive
//! element, which the count does not (it is an upper bound there), and sizes every operand,
//! where the count sizes only variables, their fields and literals (what else a call works on
//! was counted as it was built). A range is evaluated only once the count of evaluating it is known to be within the
//! limit, so counting costs no more than the limit allows either.

use cel::common::ast::{CallExpr, EntryExpr, Expr, operators};
use cel::{Context, IdedExpr, Program, Value};

use super::library::comprehensions::{is_binding, is_target_element};

/// The most one run of one expression may cost (`PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// The most all the rules of one object may cost together (`RuntimeCELCostBudget`).
pub const RUNTIME_BUDGET: u64 = 10_000_000;

/// What running an expression costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cost {
    /// The same on every value: the expression has no comprehension and builds or sorts no
    /// list; its node count.
    Fixed(u64),
    /// Depends on the values: counted on them each time ([`cost_in`]).
    Metered,
}

impl Cost {
    /// The cost of running `program`.
    pub fn of(program: &Program) -> Self {
        /// Counts the nodes; stops at a comprehension.
        fn walk(expression: &IdedExpr, nodes: &mut u64) -> Result<(), ()> {
            *nodes += 1;
            match &expression.expr {
                Expr::Comprehension(_) => return Err(()),
                Expr::Call(call) if sorts_or_builds_list(call) => return Err(()),
                _ => {}
            }
            for_each_operand(expression, |operand| walk(operand, nodes))
        }
        let mut nodes = 0;
        match walk(program.expression(), &mut nodes) {
            Ok(()) => Self::Fixed(nodes),
            Err(()) => Self::Metered,
        }
    }
}

/// Calls `visit` on each expression `expression` is made of, but for a comprehension's (whose
/// parts run in scopes of their own); stops at the first error.
fn for_each_operand<E>(
    expression: &IdedExpr,
    mut visit: impl FnMut(&IdedExpr) -> Result<(), E>,
) -> Result<(), E> {
    let mut entry = |entry: &EntryExpr| match entry {
        EntryExpr::MapEntry(entry) => {
            visit(&entry.key)?;
            visit(&entry.value)
        }
        EntryExpr::StructField(field) => visit(&field.value),
    };
    match &expression.expr {
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .try_for_each(&mut visit),
        Expr::Select(select) => visit(&select.operand),
        Expr::List(list) => list.elements.iter().try_for_each(&mut visit),
        Expr::Map(map) => map.entries.iter().try_for_each(|e| entry(&e.expr)),
        Expr::Struct(object) => object.entries.iter().try_for_each(|e| entry(&e.expr)),
        Expr::Comprehension(_) | Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Ok(()),
    }
}

/// What running `program` (of `cost`) in `context` costs; `None` once that passes `limit`.
pub fn cost_in(
    program: &Program,
    cost: Cost,
    context: &Context<'_, '_>,
    limit: u64,
) -> Option<u64> {
    match cost {
        Cost::Fixed(nodes) => (nodes <= limit).then_some(nodes),
        Cost::Metered => {
            let mut meter = Meter { spent: 0, limit };
            meter.count(program.expression(), context).ok()?;
            Some(meter.spent)
        }
    }
}

/// The count was stopped at the limit.
struct OverLimit;

struct Meter {
    spent: u64,
    limit: u64,
}

impl Meter {
    fn charge(&mut self, amount: u64) -> Result<(), OverLimit> {
        self.spent = self.spent.saturating_add(amount);
        if self.spent > self.limit {
            Err(OverLimit)
        } else {
            Ok(())
        }
    }

    fn count(&mut self, expression: &IdedExpr, context: &Context<'_, '_>) -> Result<(), OverLimit> {
        if let Expr::Comprehension(binding) = &expression.expr
            && is_binding(binding)
            && is_target_element(&binding.accu_init)
        {
            // A two-variable comprehension's value, which cel-go binds for nothing (an index
            // into a list or map, cheap to evaluate).
            let mut inner = context.new_inner_scope();
            let bound = Value::resolve(&binding.accu_init, context).unwrap_or(Value::Null);
            inner.add_variable_from_value(binding.accu_var.as_str(), bound);
            return self.count(&binding.result, &inner);
        }
        self.charge(1)?;
        match &expression.expr {
            Expr::Comprehension(comprehension) if is_binding(comprehension) => {
                // A binding (`cel.bind`, and the expansions that use it): its result sees the
                // value bound, which is counted first and so within the limit to evaluate.
                self.count(&comprehension.accu_init, context)?;
                let mut inner = context.new_inner_scope();
                let bound =
                    Value::resolve(&comprehension.accu_init, context).unwrap_or(Value::Null);
                inner.add_variable_from_value(comprehension.accu_var.as_str(), bound);
                self.count(&comprehension.result, &inner)
            }
            Expr::Comprehension(comprehension) => {
                self.count(&comprehension.iter_range, context)?;
                self.count(&comprehension.accu_init, context)?;
                // Within the limit, so evaluating the range is too.
                let range = Value::resolve(&comprehension.iter_range, context);
                let keys: Vec<Value>;
                let elements: &[Value] = match &range {
                    Ok(Value::List(items)) => items,
                    Ok(Value::Map(map)) => {
                        keys = map.map.keys().map(Value::from).collect();
                        &keys
                    }
                    // A range that fails fails the rule when it runs; nothing to count.
                    _ => &[],
                };
                let mut inner = context.new_inner_scope();
                // The accumulator's uses cost the same whatever it holds.
                inner.add_variable_from_value(comprehension.accu_var.as_str(), Value::Null);
                for element in elements {
                    inner.add_variable_from_value(comprehension.iter_var.as_str(), element.clone());
                    self.count(&comprehension.loop_cond, &inner)?;
                    self.count(&comprehension.loop_step, &inner)?;
                }
                self.count(&comprehension.result, &inner)
            }
            Expr::Call(call) => {
                for_each_operand(expression, |operand| self.count(operand, context))?;
                self.charge(size_charge(call, context))
            }
            _ => for_each_operand(expression, |operand| self.count(operand, context)),
        }
    }
}

/// What `call` costs for the size of what it works on: `in` a list and equality or `+` of
/// lists and maps by their length, string operations by a tenth of the strings' lengths (as
/// cel-go's weights). Only operands that are variables, their fields or literals are sized.
fn size_charge(call: &CallExpr, context: &Context<'_, '_>) -> u64 {
    let sized = |operand: &IdedExpr| -> u64 {
        if !is_direct(operand) {
            return 0;
        }
        match Value::resolve(operand, context) {
            Ok(Value::List(items)) => items.len() as u64,
            Ok(Value::Map(map)) => map.map.len() as u64,
            Ok(Value::String(text)) => (text.len() as u64).div_ceil(10),
            Ok(Value::Bytes(bytes)) => (bytes.len() as u64).div_ceil(10),
            _ => 0,
        }
    };
    let operands = call.target.as_deref().into_iter().chain(&call.args);
    match call.func_name.as_str() {
        // A map is searched by its hash.
        operators::IN => match call.args.get(1) {
            Some(list) if is_direct(list) => match Value::resolve(list, context) {
                Ok(Value::List(items)) => items.len() as u64,
                _ => 0,
            },
            _ => 0,
        },
        operators::EQUALS | operators::NOT_EQUALS | operators::ADD => operands.map(sized).sum(),
        "contains" | "startsWith" | "endsWith" | "matches" | "indexOf" | "lastIndexOf"
        | "lowerAscii" | "upperAscii" | "replace" | "split" | "substring" | "trim" | "join"
        | "charAt" | "find" | "findAll" | "isSorted" | "sum" | "min" | "max" | "url" | "isURL"
        | "validate" => operands.map(sized).sum(),
        // Each item of one list is looked for in the other.
        "sets.contains" | "sets.equivalent" | "sets.intersects" => {
            operands.map(sized).fold(1, u64::saturating_mul)
        }
        // The list extension: by the size of the list made, or for a sort or `distinct`
        // twice the square of the list's (a tenth more for strings), as cel-go tracks them.
        // Their operands were counted already, so evaluating them again is within the limit.
        "lists.range" | "range" => match call.args.first().map(|n| Value::resolve(n, context)) {
            Some(Ok(Value::Int(n))) => n.max(0).unsigned_abs(),
            _ => 0,
        },
        _ if sorts_or_builds_list(call) => {
            let list = match call.func_name.as_str() {
                SORT_BY_KEYS => call.args.first(),
                _ => call.target.as_deref(),
            };
            let items = match list.map(|list| Value::resolve(list, context)) {
                Some(Ok(Value::List(items))) => items,
                // The string extension's `reverse`.
                Some(Ok(Value::String(text))) => return (text.len() as u64).div_ceil(10),
                _ => return 0,
            };
            let size = items.len() as u64;
            match call.func_name.as_str() {
                // The list made: `end - start`.
                "slice" => {
                    let bound =
                        |at: usize| match call.args.get(at).map(|n| Value::resolve(n, context)) {
                            Some(Ok(Value::Int(n))) => n.max(0).unsigned_abs(),
                            _ => 0,
                        };
                    bound(1).saturating_sub(bound(0)).min(size)
                }
                "reverse" => size,
                "flatten" => match call
                    .args
                    .first()
                    .map(|depth| Value::resolve(depth, context))
                {
                    Some(Ok(Value::Int(depth))) => size.saturating_mul(depth.max(0).unsigned_abs()),
                    _ => size,
                },
                _ => {
                    let square = size.saturating_mul(size);
                    let strings = matches!(items.first(), Some(Value::String(_) | Value::Bytes(_)));
                    square
                        .saturating_mul(2)
                        .saturating_add(if strings { square / 10 } else { 0 })
                }
            }
        }
        _ => 0,
    }
}

/// Whether `call` is one of the list extension's functions, whose cost is their list's size.
fn sorts_or_builds_list(call: &CallExpr) -> bool {
    matches!(
        call.func_name.as_str(),
        "lists.range"
            | "range"
            | "slice"
            | "reverse"
            | "flatten"
            | "sort"
            | "distinct"
            | SORT_BY_KEYS
    )
}

/// The function `sortBy` expands to, which sorts a list by a list of keys.
const SORT_BY_KEYS: &str = "@sortByAssociatedKeys";

/// Whether `operand` is a variable, a field of one, or a literal: cheap to evaluate again.
fn is_direct(operand: &IdedExpr) -> bool {
    match &operand.expr {
        Expr::Ident(_) | Expr::Literal(_) => true,
        Expr::Select(select) => is_direct(&select.operand),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structural::environment;

    fn run(source: &str, size: i64, limit: u64) -> Option<u64> {
        let program = environment()
            .compile(source)
            .unwrap_or_else(|_| unreachable!());
        let mut context = Context::with_env(environment().clone());
        let items: Vec<Value> = (0..size).map(Value::Int).collect();
        context.add_variable_from_value("self", Value::List(std::sync::Arc::new(items)));
        cost_in(&program, Cost::of(&program), &context, limit)
    }

    #[test]
    fn an_expression_without_comprehension_costs_its_nodes() {
        let program = environment()
            .compile("size(self) > 1")
            .unwrap_or_else(|_| unreachable!());
        assert_eq!(Cost::of(&program), Cost::Fixed(4));
    }

    #[test]
    fn a_comprehension_costs_per_element_and_nested_ones_multiply() {
        let one = run("self.all(x, x >= 0)", 100, u64::MAX).unwrap_or_default();
        let two = run("self.all(x, x >= 0)", 200, u64::MAX).unwrap_or_default();
        assert!(
            two > one
                && two - one == one - run("self.all(x, x >= 0)", 0, u64::MAX).unwrap_or_default()
        );
        let nested =
            run("self.all(x, self.all(y, x != y || x == y))", 100, u64::MAX).unwrap_or_default();
        assert!(nested > 100 * 100, "{nested}");
    }

    #[test]
    fn searching_a_list_in_a_loop_costs_its_length_each_time() {
        let search = run("self.all(x, x in self)", 1000, u64::MAX).unwrap_or_default();
        let compare = run("self.all(x, x >= 0)", 1000, u64::MAX).unwrap_or_default();
        assert!(search >= compare + 1000 * 1000, "{search} {compare}");
        assert_eq!(run("self.all(x, x in self)", 2000, PER_CALL_LIMIT), None);
    }

    #[test]
    fn two_variable_comprehensions_cost_per_element_like_their_one_variable_forms() {
        let cost = |source: &str, size: i64| run(source, size, u64::MAX).unwrap_or_default();
        let per_element = |source: &str| cost(source, 200) - cost(source, 100);
        let one = per_element("self.all(x, x >= 0)");
        let two = per_element("self.all(i, x, x >= i)");
        assert!(two >= one && two <= 3 * one, "{one} {two}");
        assert!(per_element("self.transformList(i, x, x + i)") >= 100);
        // Nested, over the bound target: quadratic.
        assert!(cost("self.all(i, x, self.exists(j, y, x == y))", 100) > 100 * 100);
        assert_eq!(
            run(
                "self.all(i, x, self.all(j, y, self.all(k, z, x + y + z > 0)))",
                1000,
                PER_CALL_LIMIT
            ),
            None
        );
    }

    #[test]
    fn list_functions_cost_by_the_lists_they_make_or_sort() {
        let cost = |source: &str, size: i64| run(source, size, u64::MAX).unwrap_or_default();
        assert!(cost("lists.range(100000).size() > 0", 0) >= 100_000);
        assert!(cost("self.sort().size() > 0", 1000) >= 2 * 1000 * 1000);
        assert!(cost("self.map(x, x).distinct().size() > 0", 1000) >= 2 * 1000 * 1000);
        assert!(cost("self.sortBy(x, -x).size() > 0", 1000) >= 2 * 1000 * 1000);
        assert!(cost("self.reverse().size() > 0", 1000) >= 1000);
        // A slice costs what it makes, not the list it is taken from.
        assert!(cost("self.slice(0, 2).size() > 0", 1000) < 100);
        assert_eq!(run("self.sort().size() > 0", 1000, PER_CALL_LIMIT), None);
    }

    #[test]
    fn counting_stops_at_the_limit() {
        assert_eq!(
            run(
                "self.all(x, self.all(y, self.all(z, x + y + z > 0)))",
                1000,
                PER_CALL_LIMIT
            ),
            None
        );
        assert!(run("self.all(x, x > 0)", 1000, PER_CALL_LIMIT).is_some());
    }
}
