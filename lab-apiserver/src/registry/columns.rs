//! Table column descriptions, as plain data the registry keeps: what a
//! Table's `columnDefinitions` entry holds, and a CRD version's
//! `additionalPrinterColumns` (each a column and its JSONPath). Rendering
//! cells from them is [`crate::table`]'s; this module only describes.

use serde_json::Value;

/// One column definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Header (kubectl upper-cases it).
    pub name: String,
    /// OpenAPI type: string, integer, number, boolean, date.
    pub kind: &'static str,
    /// OpenAPI format ("name" marks the name column).
    pub format: String,
    /// Shown only with `-o wide` when above 0.
    pub priority: i64,
    /// Description.
    pub description: String,
}

impl Column {
    /// A column with no description; the one named `Name` gets the
    /// `name` format.
    pub fn new(name: &str, kind: &'static str, priority: i64) -> Self {
        Self {
            name: name.into(),
            kind,
            format: if name == "Name" {
                "name".into()
            } else {
                String::new()
            },
            priority,
            description: String::new(),
        }
    }
}

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    /// The column.
    pub column: Column,
    /// Its JSONPath, as in the CRD (`.spec.addresses`).
    pub json_path: String,
}

impl PrinterColumn {
    /// The columns of a CRD version (`spec.versions[i]`); `Age` when it
    /// declares none, as kube-apiserver serves them.
    pub fn of_version(version: &Value) -> Vec<PrinterColumn> {
        let declared: Vec<PrinterColumn> = version["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| PrinterColumn {
                column: Column {
                    name: c["name"].as_str().unwrap_or_default().to_owned(),
                    kind: match c["type"].as_str() {
                        Some("integer") => "integer",
                        Some("number") => "number",
                        Some("boolean") => "boolean",
                        Some("date") => "date",
                        _ => "string",
                    },
                    format: c["format"].as_str().unwrap_or_default().to_owned(),
                    priority: c["priority"].as_i64().unwrap_or(0),
                    description: c["description"].as_str().unwrap_or_default().to_owned(),
                },
                json_path: c["jsonPath"].as_str().unwrap_or_default().to_owned(),
            })
            .collect();
        if !declared.is_empty() {
            return declared;
        }
        vec![PrinterColumn {
            column: Column::new("Age", "date", 0),
            json_path: ".metadata.creationTimestamp".into(),
        }]
    }
}
