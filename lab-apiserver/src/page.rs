//! List pagination (`limit` and `continue`), as kube-apiserver pages: the
//! items in key order (namespace, then name), at most `limit` of them,
//! and a continue token naming the list's resourceVersion and the last
//! key served, from which the next page starts. Later pages show the
//! store as it is then (kube-apiserver serves them from the first page's
//! snapshot), under the first page's resourceVersion, so a watch started
//! from it sees every change since. Pure: the caller lists and serves.

use crate::error::ApiError;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::{Value, json};

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// Its items.
    pub items: Vec<Value>,
    /// The resourceVersion the list reports.
    pub rv: u64,
    /// Where the next page starts, when there is one.
    pub next: Option<String>,
    /// How many items follow this page.
    pub remaining: Option<usize>,
}

impl Page {
    /// Puts the continue token and the remaining count into a list's (or
    /// a Table's) `metadata`.
    pub fn annotate(&self, list: &mut Value) {
        if let Some(next) = &self.next {
            list["metadata"]["continue"] = json!(next);
        }
        if let Some(remaining) = self.remaining {
            list["metadata"]["remainingItemCount"] = json!(remaining);
        }
    }
}

fn key(o: &Value) -> String {
    let meta = &o["metadata"];
    format!(
        "{}/{}",
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default()
    )
}

fn token(rv: u64, start: &str) -> String {
    B64.encode(json!({ "v": "meta.k8s.io/v1", "rv": rv, "start": start }).to_string())
}

fn parse_token(token: &str) -> Option<(u64, String)> {
    let v: Value = serde_json::from_slice(&B64.decode(token.trim_end_matches('=')).ok()?).ok()?;
    if v["v"] != "meta.k8s.io/v1" {
        return None;
    }
    Some((v["rv"].as_u64()?, v["start"].as_str()?.to_owned()))
}

/// The page of `items` (a list at resourceVersion `rv`) that the query's
/// `limit` and `continue` ask for; every item when neither is given.
pub fn of(
    mut items: Vec<Value>,
    rv: u64,
    limit: Option<&str>,
    cont: Option<&str>,
) -> Result<Page, ApiError> {
    let limit = match limit.filter(|l| !l.is_empty()) {
        None => None,
        Some(l) => match l.parse::<i64>() {
            Ok(n) if n > 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            Ok(_) => None,
            Err(_) => {
                return Err(ApiError::bad_request(format!(
                    "limit: invalid value {l:?}: must be a non-negative integer"
                )));
            }
        },
    };
    let (rv, after) = match cont.filter(|c| !c.is_empty()) {
        None => (rv, None),
        Some(c) => {
            let (rv, start) = parse_token(c).ok_or_else(|| {
                ApiError::bad_request(
                    "continue key is not valid: pass the metadata.continue of the previous page unchanged",
                )
            })?;
            (rv, Some(start))
        }
    };
    if limit.is_none() && after.is_none() {
        return Ok(Page {
            items,
            rv,
            next: None,
            remaining: None,
        });
    }
    items.sort_by_key(key);
    if let Some(after) = &after {
        items.retain(|o| key(o) > *after);
    }
    let (next, remaining) = match limit {
        Some(n) if items.len() > n => {
            let rest = items.split_off(n);
            let last = items.last().map(key).unwrap_or_default();
            (Some(token(rv, &last)), Some(rest.len()))
        }
        _ => (None, None),
    };
    Ok(Page {
        items,
        rv,
        next,
        remaining,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(names: &[(&str, &str)]) -> Vec<Value> {
        names
            .iter()
            .map(|(ns, n)| json!({ "metadata": { "namespace": ns, "name": n } }))
            .collect()
    }

    fn names(p: &Page) -> Vec<String> {
        p.items.iter().map(key).collect()
    }

    #[test]
    fn pages_through_in_key_order_at_the_first_pages_version() {
        let all = objects(&[("b", "x"), ("a", "y"), ("a", "x"), ("c", "z"), ("b", "a")]);
        let first = of(all.clone(), 7, Some("2"), None).expect("first page");
        assert_eq!(names(&first), ["a/x", "a/y"]);
        assert_eq!(first.remaining, Some(3));
        let next = first.next.clone().expect("more pages");
        // The store moved on meanwhile: the next page sees what was added
        // past the cursor (not before it), under the first page's version.
        let mut later = all.clone();
        later.extend(objects(&[("a", "a"), ("b", "b")]));
        let second = of(later.clone(), 9, Some("2"), Some(&next)).expect("second page");
        assert_eq!(
            (names(&second), second.rv),
            (vec!["b/a".to_owned(), "b/b".to_owned()], 7)
        );
        let third = of(later, 9, Some("2"), second.next.as_deref()).expect("third page");
        assert_eq!(names(&third), ["b/x", "c/z"]);
        assert_eq!((third.next, third.remaining), (None, None));
    }

    #[test]
    fn no_limit_serves_everything_as_listed() {
        let all = objects(&[("b", "x"), ("a", "y")]);
        for limit in [None, Some(""), Some("0")] {
            let p = of(all.clone(), 3, limit, None).expect("page");
            assert_eq!(
                (p.items.clone(), p.next.clone()),
                (all.clone(), None),
                "{limit:?}"
            );
        }
        let p = of(all.clone(), 3, Some("5"), None).expect("page");
        assert_eq!(
            (names(&p), p.next),
            (vec!["a/y".to_owned(), "b/x".to_owned()], None)
        );
    }

    #[test]
    fn bad_limits_and_tokens_are_refused() {
        let e = of(Vec::new(), 1, Some("ten"), None).expect_err("limit");
        assert!(e.message.contains("limit"), "{}", e.message);
        for bad in [
            "not-base64!",
            &B64.encode("{}"),
            &B64.encode(r#"{"v":"x","rv":1,"start":""}"#),
        ] {
            let e = of(Vec::new(), 1, Some("1"), Some(bad)).expect_err("token");
            assert!(e.message.contains("continue"), "{}", e.message);
        }
    }
}
