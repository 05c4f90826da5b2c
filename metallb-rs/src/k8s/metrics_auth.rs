//! The API server's reviews behind the HTTPS metrics: a TokenReview to
//! learn who holds a bearer token, a SubjectAccessReview to learn whether
//! that user may `get` `/metrics` (a non-resource URL, as the reader
//! ClusterRole grants it). Each is one call within `call`'s timeout;
//! what the answers mean is `metrics::access`'s decision.

use super::call::call;
use crate::metrics::access::{Authn, Authz, ReviewFailed, User};
use crate::metrics::{BoxFuture, Reviewer};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

/// Reviews through `client` (the component's own credentials: its
/// ClusterRole may create both kinds).
pub struct Reviews {
    client: kube::Client,
}

impl Reviews {
    /// Reviews made with `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

/// Serves a component's metrics and probes ([`crate::metrics::serve`]),
/// each scrape reviewed through `client`; returns only on a server error.
pub async fn serve(
    serving: crate::metrics::Serving,
    registry: prometheus::Registry,
    health: std::sync::Arc<crate::metrics::Health>,
    client: kube::Client,
) -> anyhow::Result<()> {
    let reviews = std::sync::Arc::new(Reviews::new(client));
    crate::metrics::serve(serving, registry, health, reviews).await
}

impl Reviewer for Reviews {
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Authn, ReviewFailed>> {
        Box::pin(async move {
            let api = Api::<TokenReview>::all(self.client.clone());
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: Some(token.to_owned()),
                    audiences: None,
                },
                ..TokenReview::default()
            };
            let answer = call(api.create(&PostParams::default(), &review))
                .await
                .map_err(|e| ReviewFailed(format!("creating a tokenreview: {e}")))?;
            let status = answer.status.unwrap_or_default();
            if !status.authenticated.unwrap_or(false) {
                return Ok(Authn::Unauthenticated);
            }
            let user = status.user.unwrap_or_default();
            Ok(Authn::Authenticated(User {
                name: user.username.unwrap_or_default(),
                uid: user.uid.unwrap_or_default(),
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
            }))
        })
    }

    fn authorize<'a>(
        &'a self,
        user: &'a User,
        verb: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Authz, ReviewFailed>> {
        Box::pin(async move {
            let api = Api::<SubjectAccessReview>::all(self.client.clone());
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.name.clone()),
                    uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                    groups: Some(user.groups.clone()),
                    extra: Some(user.extra.clone()),
                    non_resource_attributes: Some(NonResourceAttributes {
                        path: Some(path.to_owned()),
                        verb: Some(verb.to_owned()),
                    }),
                    resource_attributes: None,
                },
                ..SubjectAccessReview::default()
            };
            let answer = call(api.create(&PostParams::default(), &review))
                .await
                .map_err(|e| ReviewFailed(format!("creating a subjectaccessreview: {e}")))?;
            let status = answer.status.unwrap_or_default();
            Ok(if status.allowed && !status.denied.unwrap_or(false) {
                Authz::Allowed
            } else {
                Authz::Denied
            })
        })
    }
}
