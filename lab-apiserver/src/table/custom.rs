//! Table columns of custom resources: `Name`, then the CRD version's
//! `additionalPrinterColumns` (or `Age` when it declares none), each cell
//! the column's JSONPath evaluated on the object and typed as
//! kube-apiserver's CRD table convertor does: `string` columns print the
//! value as kubectl's JSONPath printer would (lists and maps as compact
//! JSON), `date` columns as an age, a missing value as no cell.

use super::{Cells, Column, age};
use crate::registry::columns::PrinterColumn;
use jsonpath_rust::JsonPath;
use serde_json::{Value, json};

/// The columns and cell function for a custom resource.
pub fn printer(columns: &[PrinterColumn]) -> (Vec<Column>, Cells<'_>) {
    let mut defs = vec![Column::new("Name", "string", 0)];
    defs.extend(columns.iter().map(|c| c.column.clone()));
    let cells = move |o: &Value, now: jiff::Timestamp| {
        let mut row = vec![o["metadata"]["name"].clone()];
        row.extend(columns.iter().map(|c| cell(c, o, now)));
        row
    };
    (defs, Box::new(cells))
}

/// The value at a CRD column's JSONPath (the first result), if any.
fn find<'a>(json_path: &str, object: &'a Value) -> Option<&'a Value> {
    let path = format!("${}", json_path.trim());
    let found = object.query(&path).ok()?;
    found.into_iter().next().filter(|v| !v.is_null())
}

fn cell(c: &PrinterColumn, object: &Value, now: jiff::Timestamp) -> Value {
    let Some(value) = find(&c.json_path, object) else {
        return Value::Null;
    };
    match (c.column.kind, value) {
        ("string", Value::String(s)) => json!(s),
        ("string", v @ (Value::Array(_) | Value::Object(_))) => json!(v.to_string()),
        ("string", v) => json!(v.to_string()),
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, |f| json!(f)),
        ("boolean", Value::Bool(b)) => json!(b),
        ("date", v @ Value::String(_)) => age(v, now),
        _ => Value::Null,
    }
}
