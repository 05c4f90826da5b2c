//! CEL validation rules of CRD schemas (`x-kubernetes-validations`),
//! evaluated as kube-apiserver evaluates them, for the lab API server and
//! `metallb-rs validate`:
//!
//! 1. A rule applies to the value at the schema node that carries it
//!    (`self`); an absent optional field is not validated.
//! 2. A rule that mentions `oldSelf` is a transition rule: it is evaluated
//!    only on an update whose old object has a value at the same place
//!    (properties are matched by name; list items are not correlated).
//! 3. A rule that is not `true` is a violation with the rule's `message`
//!    (or `failed rule: <rule>`), reported at the field the rule sits on,
//!    as `Invalid value: "<type>": <message>`; a rule that does not
//!    compile or fails to evaluate is a violation naming the error.
//!
//! Pure: JSON in, violations out. `messageExpression`, `fieldPath`,
//! `reason` and CEL cost limits are not implemented.

use serde_json::Value;

/// A rule that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where (`spec.connectTime`, `spec.items[1]`; empty for the root).
    pub field: String,
    /// kube-apiserver's text: `Invalid value: "string": <message>`.
    pub message: String,
}

/// The violations of every rule in `schema` (an `openAPIV3Schema`) by
/// `obj`; `old` is the stored object on an update.
pub fn validate(obj: &Value, old: Option<&Value>, schema: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    walk("", obj, old, schema, &mut out);
    out
}

fn walk(path: &str, value: &Value, old: Option<&Value>, schema: &Value, out: &mut Vec<Violation>) {
    if let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for rule in rules {
            if let Some(message) = check(rule, value, old) {
                let kind = schema
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("object");
                out.push(Violation {
                    field: path.to_owned(),
                    message: format!("Invalid value: {kind:?}: {message}"),
                });
            }
        }
    }
    let join = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (name, v) in map {
                let child = props.and_then(|p| p.get(name)).or(additional);
                if let Some(child) = child {
                    let old_v = old.and_then(|o| o.get(name));
                    walk(&join(name), v, old_v, child, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    walk(&format!("{path}[{i}]"), v, None, item_schema, out);
                }
            }
        }
        _ => {}
    }
}

/// `None` when `rule` holds (or does not apply), else the message.
fn check(rule: &Value, value: &Value, old: Option<&Value>) -> Option<String> {
    let source = rule.get("rule").and_then(Value::as_str)?;
    let transition = source.contains("oldSelf");
    if transition && old.is_none() {
        return None;
    }
    let failed = || {
        rule.get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("failed rule: {source}"))
    };
    let mut vars = vec![("self", value)];
    if let Some(old) = old {
        vars.push(("oldSelf", old));
    }
    match eval(source, &vars) {
        Ok(Outcome::Bool(true)) => None,
        Ok(Outcome::Bool(false)) => Some(failed()),
        Ok(Outcome::Other(other)) => Some(format!("rule evaluated to {other}, not a bool")),
        Err(Error::Compile(e)) => Some(format!("compilation failed: {e}")),
        Err(Error::Eval(e)) => Some(format!("rule evaluation failed: {e}")),
    }
}

/// What an expression evaluated to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A bool, as every validation and condition must give.
    Bool(bool),
    /// Anything else, printed.
    Other(String),
}

/// Why an expression gave no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// It does not compile.
    Compile(String),
    /// It failed while evaluating (a missing field, a type mismatch).
    Eval(String),
}

/// Evaluates CEL `expression` with the JSON `vars` bound by name: the
/// one way into CEL for schema rules and for the lab API server's
/// admission policies.
pub fn eval(expression: &str, vars: &[(&str, &Value)]) -> Result<Outcome, Error> {
    let program = cel::Program::compile(expression).map_err(|e| Error::Compile(e.to_string()))?;
    let mut context = cel::Context::default();
    for (name, value) in vars {
        context
            .add_variable(*name, (*value).clone())
            .map_err(|e| Error::Eval(e.to_string()))?;
    }
    match program.execute(&context) {
        Ok(cel::Value::Bool(b)) => Ok(Outcome::Bool(b)),
        Ok(other) => Ok(Outcome::Other(format!("{other:?}"))),
        Err(e) => Err(Error::Eval(e.to_string())),
    }
}

#[cfg(test)]
mod tests;
