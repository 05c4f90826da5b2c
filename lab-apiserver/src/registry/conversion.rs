//! What a CRD declares about conversion (`spec.conversion`), as plain
//! data the registry keeps with every served version: the webhook to call
//! and the storage version, or nothing for strategy None. Calling the
//! webhook is [`crate::conversion`]'s.

use serde_json::Value;

/// A CRD's conversion webhook.
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    /// `spec.conversion.webhook.clientConfig`.
    pub client_config: Value,
    /// The storage version's name.
    pub storage: String,
}

impl Webhook {
    /// The conversion webhook of CRD `crd` (none for strategy None); the
    /// error names the field that is wrong.
    pub fn of_crd(crd: &Value) -> Result<Option<Self>, String> {
        let c = &crd["spec"]["conversion"];
        match c["strategy"].as_str() {
            None | Some("None") => return Ok(None),
            Some("Webhook") => {}
            Some(other) => {
                return Err(format!(
                    "spec.conversion.strategy: Unsupported value: {other:?}: supported values: \"None\", \"Webhook\""
                ));
            }
        }
        let client_config = c["webhook"]["clientConfig"].clone();
        if !client_config.is_object() {
            return Err("spec.conversion.webhook.clientConfig: Required value: required when strategy is set to Webhook".into());
        }
        if !c["webhook"]["conversionReviewVersions"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v == "v1"))
        {
            return Err("spec.conversion.webhook.conversionReviewVersions: Invalid value: must include \"v1\" (the only ConversionReview version this server sends)".into());
        }
        let storage = crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["storage"] == true)
            .and_then(|v| v["name"].as_str())
            .ok_or(
                "spec.versions: Invalid value: exactly one version must be the storage version",
            )?;
        Ok(Some(Self {
            client_config,
            storage: storage.to_owned(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn crd(conversion: Value) -> Value {
        json!({ "spec": { "group": "example.com", "conversion": conversion, "versions": [
            { "name": "v1", "served": true, "storage": false },
            { "name": "v2", "served": true, "storage": true },
        ] } })
    }

    #[rstest]
    #[case(json!(null), Ok(None))]
    #[case(json!({ "strategy": "None" }), Ok(None))]
    #[case(json!({ "strategy": "Webhook", "webhook": { "clientConfig": { "url": "https://h/" }, "conversionReviewVersions": ["v1"] } }),
        Ok(Some(Webhook { client_config: json!({ "url": "https://h/" }), storage: "v2".into() })))]
    #[case(json!({ "strategy": "Webhook", "webhook": { "conversionReviewVersions": ["v1"] } }),
        Err("spec.conversion.webhook.clientConfig: Required value: required when strategy is set to Webhook".into()))]
    #[case(json!({ "strategy": "Webhook", "webhook": { "clientConfig": {}, "conversionReviewVersions": ["v1beta1"] } }),
        Err("spec.conversion.webhook.conversionReviewVersions: Invalid value: must include \"v1\" (the only ConversionReview version this server sends)".into()))]
    #[case(json!({ "strategy": "Magic" }),
        Err("spec.conversion.strategy: Unsupported value: \"Magic\": supported values: \"None\", \"Webhook\"".into()))]
    fn strategies(#[case] conversion: Value, #[case] expected: Result<Option<Webhook>, String>) {
        assert_eq!(Webhook::of_crd(&crd(conversion)), expected);
    }
}
