//! Who a request comes from and whether it may do what it asks.
//!
//! 1. Authentication: `Authorization: Bearer <token>` with a token this
//!    server signed ([`token`]); a ServiceAccount's token only while the
//!    account exists. No token: `system:anonymous`. A bad token: 401.
//! 2. Impersonation (`Impersonate-User`, `Impersonate-Group`,
//!    `Impersonate-Uid`): allowed when the real user may `impersonate`
//!    the `users`, `serviceaccounts` or `groups` named; the request then
//!    runs as the impersonated user.
//! 3. Authorization: `system:masters` may do anything; everyone else what
//!    the RBAC objects in the store allow ([`rbac`]). A refusal is a 403
//!    with kube-apiserver's message.
//!
//! The policy every cluster starts with (cluster-admin for
//! `system:masters`, discovery, health and self reviews for everyone
//! authenticated) is [`bootstrap::objects`].

pub mod bootstrap;
pub mod escalation;
pub mod rbac;
pub mod token;

use crate::error::ApiError;
use rbac::Request;

/// An authenticated (or anonymous) user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// User name.
    pub name: String,
    /// UID (ServiceAccounts: none here).
    pub uid: String,
    /// Every group, `system:authenticated` included.
    pub groups: Vec<String>,
}

/// The group that may do anything.
pub const MASTERS: &str = "system:masters";

impl User {
    /// The user a token's claims name.
    pub fn from_claims(claims: &token::Claims) -> Self {
        let mut groups = claims.groups.clone();
        groups.push("system:authenticated".into());
        Self {
            name: claims.user.clone(),
            uid: String::new(),
            groups,
        }
    }

    /// The unauthenticated user.
    pub fn anonymous() -> Self {
        Self {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
        }
    }

    /// `name` as impersonated with `groups`: ServiceAccount names get the
    /// account groups, everyone `system:authenticated`.
    pub fn impersonated(name: &str, groups: Vec<String>, uid: &str) -> Self {
        let mut all = groups;
        if let Some(ns) = service_account_namespace(name)
            && all.is_empty()
        {
            all.push("system:serviceaccounts".into());
            all.push(format!("system:serviceaccounts:{ns}"));
        }
        if name != "system:anonymous" && !all.iter().any(|g| g == "system:authenticated") {
            all.push("system:authenticated".into());
        }
        Self {
            name: name.into(),
            uid: uid.into(),
            groups: all,
        }
    }

    fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }
}

/// The namespace of a `system:serviceaccount:<ns>:<name>` user name.
fn service_account_namespace(user: &str) -> Option<&str> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    rest.split_once(':').map(|(ns, _)| ns)
}

/// Whether `user` may make `request` under `policy`.
pub fn allowed(policy: &rbac::Policy, user: &User, request: &Request) -> bool {
    user.is_master() || rbac::allows(policy, user, request)
}

/// The 403 kube-apiserver gives for `request` refused to `user`.
pub fn forbidden(user: &User, request: &Request) -> ApiError {
    match request {
        Request::Resource {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
        } => {
            let qualified = if group.is_empty() {
                resource.clone()
            } else {
                format!("{resource}.{group}")
            };
            let what = if name.is_empty() {
                qualified
            } else {
                format!("{qualified} {name:?}")
            };
            let full = if subresource.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{subresource}")
            };
            let scope = if namespace.is_empty() {
                "at the cluster scope".to_owned()
            } else {
                format!("in the namespace {namespace:?}")
            };
            let mut e = ApiError::forbidden(format!(
                "{what} is forbidden: User {:?} cannot {verb} resource {full:?} in API group {group:?} {scope}",
                user.name
            ));
            e.details = Some(Box::new((name.clone(), group.clone(), resource.clone())));
            e
        }
        Request::NonResource { verb, path } => ApiError::forbidden(format!(
            "forbidden: User {:?} cannot {verb} path {path:?}",
            user.name
        )),
    }
}

/// The `Impersonate-*` headers of a request.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Impersonation {
    /// `Impersonate-User`.
    pub user: Option<String>,
    /// `Impersonate-Group` (repeatable).
    pub groups: Vec<String>,
    /// `Impersonate-Uid`.
    pub uid: Option<String>,
}

impl Impersonation {
    /// Reads the headers.
    pub fn from_headers(headers: &axum::http::HeaderMap) -> Self {
        let all = |name: &str| {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok().map(str::to_owned))
                .collect::<Vec<_>>()
        };
        Self {
            user: all("impersonate-user").into_iter().next(),
            groups: all("impersonate-group"),
            uid: all("impersonate-uid").into_iter().next(),
        }
    }

    /// The checks the real user must pass, one per impersonated name.
    pub fn checks(&self) -> Vec<Request> {
        let mut out = Vec::new();
        let check = |resource: &str, namespace: &str, name: &str| Request::Resource {
            verb: "impersonate".into(),
            group: String::new(),
            resource: resource.into(),
            subresource: String::new(),
            namespace: namespace.into(),
            name: name.into(),
        };
        if let Some(user) = &self.user {
            match user
                .strip_prefix("system:serviceaccount:")
                .and_then(|r| r.split_once(':'))
            {
                Some((ns, name)) => out.push(check("serviceaccounts", ns, name)),
                None => out.push(check("users", "", user)),
            }
        }
        for g in &self.groups {
            out.push(check("groups", "", g));
        }
        if let Some(uid) = &self.uid {
            let mut c = check("uids", "", uid);
            if let Request::Resource { group, .. } = &mut c {
                *group = "authentication.k8s.io".into();
            }
            out.push(c);
        }
        out
    }

    /// Whether any header asks for impersonation.
    pub fn requested(&self) -> bool {
        self.user.is_some() || !self.groups.is_empty() || self.uid.is_some()
    }
}

/// The bearer token of a request, if any.
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_messages_read_like_kube_apiserver() {
        let speaker =
            User::impersonated("system:serviceaccount:metallb-system:speaker", vec![], "");
        let delete = Request::Resource {
            verb: "delete".into(),
            group: "metallb.io".into(),
            resource: "ipaddresspools".into(),
            subresource: String::new(),
            namespace: "metallb-system".into(),
            name: "prod".into(),
        };
        assert_eq!(
            forbidden(&speaker, &delete).message,
            r#"ipaddresspools.metallb.io "prod" is forbidden: User "system:serviceaccount:metallb-system:speaker" cannot delete resource "ipaddresspools" in API group "metallb.io" in the namespace "metallb-system""#
        );
        let list_nodes = Request::Resource {
            verb: "patch".into(),
            group: String::new(),
            resource: "services".into(),
            subresource: "status".into(),
            namespace: String::new(),
            name: String::new(),
        };
        assert_eq!(
            forbidden(&speaker, &list_nodes).message,
            r#"services is forbidden: User "system:serviceaccount:metallb-system:speaker" cannot patch resource "services/status" in API group "" at the cluster scope"#
        );
        assert_eq!(
            forbidden(
                &User::anonymous(),
                &Request::NonResource {
                    verb: "get".into(),
                    path: "/api".into()
                }
            )
            .message,
            r#"forbidden: User "system:anonymous" cannot get path "/api""#
        );
        assert_eq!(
            speaker.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:metallb-system",
                "system:authenticated"
            ]
        );
    }
}
