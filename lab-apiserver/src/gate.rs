//! The door every request goes through before it is served: who sends it
//! (token, impersonation) and whether RBAC lets them ([`crate::auth`] does
//! the deciding; this module reads the request and the store).

use crate::auth::escalation;
use crate::auth::rbac::{Policy, Request};
use crate::auth::{self, Impersonation, User};
use crate::error::ApiError;
use crate::registry::ResourceType;
use crate::state::State;
use axum::http::{HeaderMap, Method};
use serde_json::Value;

/// The user behind `headers`: the token's, or the impersonated one when
/// the token's user may impersonate it.
pub fn authenticate(s: &State, headers: &HeaderMap) -> Result<User, ApiError> {
    let real = match auth::bearer(headers) {
        None => User::anonymous(),
        Some(token) => {
            let claims = s
                .signer
                .verify(token, jiff::Timestamp::now().as_second())
                .map_err(|_| ApiError::unauthorized())?;
            if let Some((ns, name)) = &claims.service_account {
                // kube-apiserver refuses tokens of deleted accounts, and
                // of a deleted account's namesake (tokens are bound to
                // the account's UID).
                let account = s
                    .store
                    .get(&(String::new(), "serviceaccounts".into()), ns, name);
                let same = account.is_some_and(|a| {
                    claims
                        .account_uid
                        .as_deref()
                        .is_none_or(|uid| a["metadata"]["uid"].as_str() == Some(uid))
                });
                if !same {
                    return Err(ApiError::unauthorized());
                }
            }
            User::from_claims(&claims)
        }
    };
    let imp = Impersonation::from_headers(headers);
    if !imp.requested() {
        return Ok(real);
    }
    for check in imp.checks() {
        authorize(s, &real, &check)?;
    }
    let Some(name) = imp.user else {
        return Err(ApiError::bad_request(
            "requested impersonation of groups or a uid without a user: send Impersonate-User too",
        ));
    };
    Ok(User::impersonated(
        &name,
        imp.groups,
        imp.uid.as_deref().unwrap_or_default(),
    ))
}

/// The RBAC objects that apply in `namespace`.
pub fn policy(s: &State, namespace: &str) -> Policy {
    let rbac = |plural: &str, ns: Option<&str>| {
        s.store
            .list(&("rbac.authorization.k8s.io".into(), plural.into()), ns)
            .iter()
            .map(|o| (**o).clone())
            .collect::<Vec<_>>()
    };
    Policy {
        cluster_roles: rbac("clusterroles", None),
        cluster_role_bindings: rbac("clusterrolebindings", None),
        roles: if namespace.is_empty() {
            Vec::new()
        } else {
            rbac("roles", Some(namespace))
        },
        role_bindings: if namespace.is_empty() {
            Vec::new()
        } else {
            rbac("rolebindings", Some(namespace))
        },
    }
}

fn namespace_of(request: &Request) -> &str {
    match request {
        Request::Resource { namespace, .. } => namespace,
        Request::NonResource { .. } => "",
    }
}

/// Whether `user` may make `request`; the 403 otherwise.
pub fn authorize(s: &State, user: &User, request: &Request) -> Result<(), ApiError> {
    if auth::allowed(&policy(s, namespace_of(request)), user, request) {
        Ok(())
    } else {
        Err(auth::forbidden(user, request))
    }
}

/// Escalation prevention for a write of an RBAC object
/// ([`escalation`]): the writer must hold what it grants, or be allowed
/// to `escalate` (roles) or `bind` (the role a binding names).
pub fn rbac_write(
    s: &State,
    user: &User,
    t: &ResourceType,
    ns: &str,
    object: &Value,
) -> Result<(), ApiError> {
    use escalation::GROUP;
    if t.group != GROUP {
        return Ok(());
    }
    let role_rules = |kind: &str, name: &str| {
        let (plural, scope) = if kind == "Role" {
            ("roles", ns)
        } else {
            ("clusterroles", "")
        };
        s.store
            .get(&(GROUP.into(), plural.into()), scope, name)
            .map(|r| r["rules"].as_array().cloned().unwrap_or_default())
    };
    let Some(demand) = escalation::demand(&t.plural, ns, object, role_rules) else {
        return Ok(());
    };
    // One policy per scope the requests name, not one per request.
    let here = policy(s, ns);
    let cluster = policy(s, "");
    let missing = escalation::not_held(&demand, |r| {
        let p = if namespace_of(r).is_empty() {
            &cluster
        } else {
            &here
        };
        auth::allowed(p, user, r)
    });
    if missing.is_empty() {
        return Ok(());
    }
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let shown: Vec<String> = missing.iter().take(10).map(|r| format!("{r:?}")).collect();
    Err(ApiError::forbidden(format!(
        "{}.{GROUP} {name:?} is forbidden: user {:?} (groups={:?}) is attempting to grant RBAC permissions not currently held: {}{}",
        t.plural,
        user.name,
        user.groups,
        shown.join(", "),
        if missing.len() > shown.len() {
            format!(" and {} more", missing.len() - shown.len())
        } else {
            String::new()
        }
    )))
}

/// A request outside the API.
pub fn non_resource(method: &Method, path: &str) -> Request {
    Request::NonResource {
        verb: method.as_str().to_lowercase(),
        path: path.to_owned(),
    }
}

/// What a REST call on a resource does, in RBAC terms.
pub struct ResourceCall<'a> {
    /// HTTP method.
    pub method: &'a Method,
    /// API group.
    pub group: &'a str,
    /// Plural.
    pub resource: &'a str,
    /// Subresource.
    pub subresource: Option<&'a str>,
    /// Namespace from the path.
    pub namespace: &'a str,
    /// Name from the path.
    pub name: Option<&'a str>,
    /// `?watch=true`.
    pub watch: bool,
    /// The name a list or watch selects (`fieldSelector=metadata.name=X`):
    /// kube-apiserver authorizes it as a request for that name, so a
    /// grant restricted by `resourceNames` allows watching one object.
    pub selected: Option<&'a str>,
}

/// The RBAC request of a REST call.
pub fn resource(call: &ResourceCall<'_>) -> Request {
    let verb = match (call.method.as_str(), call.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if call.watch => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        (other, _) => return non_resource(call.method, &other.to_lowercase()),
    };
    Request::Resource {
        verb: verb.into(),
        group: call.group.into(),
        resource: call.resource.into(),
        subresource: call.subresource.unwrap_or_default().into(),
        namespace: call.namespace.into(),
        name: call.name.or(call.selected).unwrap_or_default().into(),
    }
}
