//! A schema node's CEL validation rules (`x-kubernetes-validations`), compiled once with the
//! node: the rule, its message or message expression, the reason and field path its error
//! takes, and whether it is a transition rule (it reads `oldSelf`).

use std::sync::{Arc, OnceLock};

use cel::{Env, Program};

use super::rule_cost::Cost;
use serde_json::Value;

/// The CEL environment rules compile and run in: the standard library with optional types,
/// cel-go's string and list extensions (the lists one as kube offers it since 1.34) and
/// kube-apiserver's own library ([`super::library`]), as a cluster offers them. The list
/// functions that build or sort a list are charged by their lists' sizes
/// ([`super::rule_cost`]), as cel-go charges them.
pub fn environment() -> &'static Arc<Env> {
    static ENVIRONMENT: OnceLock<Arc<Env>> = OnceLock::new();
    ENVIRONMENT.get_or_init(|| {
        let mut env = Env::stdlib().with_optional_support(true);
        // Each function is declared once, under a name and signature of its own: registering
        // them on the standard library cannot clash (a test registers them on a fresh one and
        // unwraps).
        let _ = env.add_extension(cel::extensions::strings);
        let _ = env.add_extension(cel::extensions::lists);
        let _ = super::library::register(&mut env);
        Arc::new(env)
    })
}

/// A compiled expression, or why it did not compile.
pub type Compiled = Result<Arc<Program>, String>;

fn compile(source: &str) -> Compiled {
    environment()
        .compile(source)
        .map(Arc::new)
        .map_err(|error| error.to_string())
}

/// One entry of `x-kubernetes-validations`.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The entry as the schema states it.
    pub stated: Value,
    /// The rule's source.
    pub rule: String,
    /// The rule, compiled.
    pub program: Compiled,
    /// `message`: the error's detail when the rule fails.
    pub message: String,
    /// `messageExpression`, compiled: computes the detail instead.
    pub message_expression: Option<(String, Compiled)>,
    /// What running the rule costs.
    pub cost: Cost,
    /// What running the message expression costs.
    pub message_cost: Cost,
    /// `reason`: the error's type (`FieldValueInvalid` by default).
    pub reason: Option<String>,
    /// `fieldPath`: where the error is reported, below the node (without its leading dot).
    pub field_path: String,
    /// Whether the rule reads `oldSelf` (a transition rule: it runs on updates only).
    pub uses_old_self: bool,
    /// Whether the rule or its message expression reads `oldSelf` (which is then bound).
    pub reads_old_self: bool,
    /// `optionalOldSelf`: a transition rule that also runs where there is no old value, with
    /// `oldSelf` an optional (`optional.none()` then, `optional.of(old)` on an update).
    pub optional_old_self: bool,
}

impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.stated == other.stated
    }
}

impl Eq for Rule {}

impl Rule {
    /// Reads the `x-kubernetes-validations` of a schema node.
    pub(super) fn read_all(schema: &Value) -> Vec<Arc<Rule>> {
        schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|entry| entry.is_object())
            .map(|entry| Arc::new(Self::read(entry)))
            .collect()
    }

    fn read(entry: &Value) -> Self {
        let text = |field: &str| entry[field].as_str().unwrap_or_default().to_string();
        let rule = text("rule");
        let program = compile(&rule);
        let uses_old_self = program
            .as_ref()
            .is_ok_and(|program| program.references().has_variable("oldSelf"));
        let message_expression = entry["messageExpression"]
            .as_str()
            .filter(|source| !source.is_empty())
            .map(|source| (source.to_string(), compile(source)));
        let reads_old_self = uses_old_self
            || message_expression.as_ref().is_some_and(|(_, compiled)| {
                compiled
                    .as_ref()
                    .is_ok_and(|program| program.references().has_variable("oldSelf"))
            });
        let cost_of = |compiled: Option<&Compiled>| match compiled {
            Some(Ok(program)) => Cost::of(program),
            _ => Cost::Fixed(0),
        };
        let cost = cost_of(Some(&program));
        let message_cost = cost_of(message_expression.as_ref().map(|(_, compiled)| compiled));
        Self {
            stated: entry.clone(),
            rule,
            program,
            message: text("message"),
            message_expression,
            cost,
            message_cost,
            reason: entry["reason"].as_str().map(str::to_string),
            field_path: text("fieldPath").trim_start_matches('.').to_string(),
            uses_old_self,
            reads_old_self,
            optional_old_self: entry["optionalOldSelf"] == Value::Bool(true),
        }
    }

    /// kube's `ruleErrorString`: the message if there is one, else the rule.
    pub fn error_string(&self) -> &str {
        let message = self.message.trim();
        if message.is_empty() {
            self.rule.trim()
        } else {
            message
        }
    }
}
