//! The CEL functions kube-apiserver adds to the standard library for validation rules
//! (apiserver's `pkg/cel/library`, cel-go's `ext.Sets` and two-variable comprehensions): list
//! aggregates, regex search, sets, quantities, semantic versions, IP addresses and CIDRs, URLs,
//! named string formats, and comprehensions over an index (or key) and a value. A rule that
//! uses them compiles and runs here as it does on a cluster.
//!
//! The cel crate dispatches an overload to a plain function over its own value
//! representation; each function here is written over [`Value`] and adapted once by
//! [`overload!`], so the library reads as ordinary Rust.

pub mod comprehensions;
mod formats;
mod lists;
mod network;
mod quantity;
mod regex;
mod semver;
mod sets;
mod urls;

use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError, Value};

/// Registers the whole library on `env`.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    lists::register(env)?;
    regex::register(env)?;
    sets::register(env)?;
    quantity::register(env)?;
    network::register(env)?;
    urls::register(env)?;
    formats::register(env)?;
    semver::register(env)?;
    comprehensions::register(env)?;
    Ok(())
}

/// What a library function returns: a value, or the error the rule reports.
type Outcome = Result<Value, ExecutionError>;

/// Runs `body` on the call's arguments (the receiver first, for a member function) as
/// [`Value`]s, and hands its result back to the interpreter.
fn call<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    body: fn(&str, &[Value]) -> Outcome,
    name: &str,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let values = args
        .iter()
        .map(|arg| Value::try_from(arg.as_ref() as &dyn Val))
        .collect::<Result<Vec<_>, _>>()?;
    let result: Box<dyn Val> = body(name, &values)?.try_into()?;
    Ok(CowVal::from(result))
}

/// Declares `$wrapper`, the interpreter's entry point for the library function `$body`
/// (`fn(name, args) -> Outcome`), reported under `$name` in its errors.
macro_rules! overload {
    ($wrapper:ident, $name:literal, $body:expr) => {
        fn $wrapper<'b, 'v>(
            args: Vec<cel::common::value::CowVal<'b, 'v>>,
        ) -> Result<cel::common::value::CowVal<'b, 'v>, cel::ExecutionError> {
            super::call(args, $body, $name)
        }
    };
}
pub(crate) use overload;

/// The error a library function reports.
fn error(name: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(name, message)
}

/// The error for arguments of types no overload takes.
fn no_such_overload(name: &str) -> ExecutionError {
    error(name, "no such overload")
}

/// The argument at `index` as a string.
fn string_arg<'a>(name: &str, args: &'a [Value], index: usize) -> Result<&'a str, ExecutionError> {
    match args.get(index) {
        Some(Value::String(text)) => Ok(text),
        _ => Err(no_such_overload(name)),
    }
}

/// The argument at `index` as a list.
fn list_arg<'a>(
    name: &str,
    args: &'a [Value],
    index: usize,
) -> Result<&'a [Value], ExecutionError> {
    match args.get(index) {
        Some(Value::List(items)) => Ok(items),
        _ => Err(no_such_overload(name)),
    }
}

/// The argument at `index` as an opaque value of type `T`.
fn opaque_arg<'a, T: 'static>(
    name: &str,
    args: &'a [Value],
    index: usize,
) -> Result<&'a T, ExecutionError> {
    match args.get(index) {
        Some(Value::Opaque(opaque)) => opaque
            .downcast_ref::<T>()
            .ok_or_else(|| no_such_overload(name)),
        _ => Err(no_such_overload(name)),
    }
}

/// `optional.of(value)`, or `optional.none()`.
fn optional(value: Option<Value>) -> Value {
    let optional = match value {
        Some(value) => cel::objects::OptionalValue::of(value),
        None => cel::objects::OptionalValue::none(),
    };
    Value::Opaque(std::sync::Arc::new(optional))
}

#[cfg(test)]
pub(crate) mod tests {
    use cel::{Context, Value};

    use crate::structural::environment;

    /// Runs `source` with no variables.
    pub fn eval(source: &str) -> Result<Value, String> {
        let program = environment()
            .compile(source)
            .map_err(|error| error.to_string())?;
        let context = Context::with_env(environment().clone());
        program.execute(&context).map_err(|error| error.to_string())
    }

    #[test]
    fn the_library_registers_on_the_standard_library_without_a_clash() {
        let mut env = cel::Env::stdlib().with_optional_support(true);
        env.add_extension(cel::extensions::strings).unwrap();
        env.add_extension(cel::extensions::lists).unwrap();
        super::register(&mut env).unwrap();
    }

    /// Asserts that each expression evaluates to `true`.
    pub fn assert_true(sources: &[&str]) {
        for source in sources {
            assert_eq!(eval(source), Ok(Value::Bool(true)), "{source}");
        }
    }
}
