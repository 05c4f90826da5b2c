//! Who may read `/metrics` over HTTPS, with controller-runtime's
//! semantics (its authentication and authorization filter): a bearer
//! token is reviewed by the API server (TokenReview), its user's access
//! to the request's path and verb too (SubjectAccessReview); only the
//! answers are decided here, the reviews are made by the caller. Also
//! [`Caches`], which spare the API server a review per scrape. Pure:
//! time is an argument, no I/O, not async.
//!
//! Status codes as controller-runtime: 401 without a usable token or for
//! one the API server does not authenticate, 403 for a user it does not
//! allow, 500 when a review could not be made (the reason only in the
//! log). Errors are never cached and a failed review never falls back
//! to an earlier answer: while the API server cannot say, scrapes fail
//! visibly rather than being served on a decision nobody can revoke.

use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// How long a token review's answer is reused, either way.
pub const TOKEN_TTL: Duration = Duration::from_secs(60);
/// How long an allowed access is reused.
pub const ALLOW_TTL: Duration = Duration::from_secs(300);
/// How long a denied access is reused (short: a new binding shows soon).
pub const DENY_TTL: Duration = Duration::from_secs(30);
/// Entries per cache at most; anyone can send tokens, so the caches are
/// bounded whatever they send.
pub const CACHE_CAPACITY: usize = 1024;

/// An authenticated user, as the TokenReview returned it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct User {
    /// `username`.
    pub name: String,
    /// `uid`.
    pub uid: String,
    /// `groups`.
    pub groups: Vec<String>,
    /// `extra`.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// A TokenReview's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authn {
    /// The token belongs to this user.
    Authenticated(User),
    /// The API server does not know the token.
    Unauthenticated,
}

/// A SubjectAccessReview's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authz {
    /// `allowed` and not `denied`.
    Allowed,
    /// Anything else.
    Denied,
}

/// A review that could not be made (the API server's error, a timeout);
/// the text is for the log only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewFailed(pub String);

/// What the request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The metrics.
    Serve,
    /// Refused with this status and body.
    Refuse {
        /// The HTTP status.
        status: u16,
        /// The body (never the reason a review failed).
        body: String,
    },
}

fn refuse(status: u16, body: impl Into<String>) -> Answer {
    Answer::Refuse {
        status,
        body: body.into(),
    }
}

/// The bearer token of an `Authorization` header (the scheme in any
/// case), or the 401 to answer without asking anyone.
pub fn token(authorization: Option<&[u8]>) -> Result<&str, Answer> {
    let unauthorized = || refuse(401, "Unauthorized");
    let header =
        std::str::from_utf8(authorization.ok_or_else(unauthorized)?).map_err(|_| unauthorized())?;
    let (scheme, token) = header.trim().split_once(' ').ok_or_else(unauthorized)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(unauthorized());
    }
    Ok(token)
}

/// After the token review: the user to authorize, or the answer.
pub fn authenticated(review: Result<Authn, ReviewFailed>) -> Result<User, Answer> {
    match review {
        Ok(Authn::Authenticated(user)) => Ok(user),
        Ok(Authn::Unauthenticated) => Err(refuse(401, "Unauthorized")),
        Err(_) => Err(refuse(500, "Authentication failed")),
    }
}

/// After the access review of `user`: the answer.
pub fn authorized(user: &User, review: Result<Authz, ReviewFailed>) -> Answer {
    match review {
        Ok(Authz::Allowed) => Answer::Serve,
        Ok(Authz::Denied) => refuse(403, format!("Authorization denied for user {}", user.name)),
        Err(_) => refuse(500, format!("Authorization for user {} failed", user.name)),
    }
}

/// What the access review asks: the user (groups and extra sorted, so
/// the same user in another order is one entry), the lowercase verb and
/// the path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AccessKey {
    user: User,
    verb: String,
    path: String,
}

impl AccessKey {
    /// `user` asking to `method` `path`.
    pub fn new(user: &User, method: &str, path: &str) -> Self {
        let mut user = user.clone();
        user.groups.sort();
        for values in user.extra.values_mut() {
            values.sort();
        }
        Self {
            user,
            verb: method.to_ascii_lowercase(),
            path: path.to_owned(),
        }
    }

    /// The lowercase verb the review asks about.
    pub fn verb(&self) -> &str {
        &self.verb
    }
}

/// A token as the cache keeps it: its SHA-256, never the token.
pub type TokenKey = [u8; 32];

/// `token`'s cache key.
pub fn token_key(token: &str) -> TokenKey {
    Sha256::digest(token.as_bytes()).into()
}

/// A map whose entries expire, holding at most a fixed number.
#[derive(Debug)]
pub struct Expiring<K, V> {
    entries: HashMap<K, (V, Instant)>,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> Expiring<K, V> {
    /// An empty map of at most `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// The value of `key`, unless expired at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let (v, until) = self.entries.get(key)?;
        (now < *until).then(|| v.clone())
    }

    /// Keeps `value` for `key` until `now + ttl`. When full, the expired
    /// entries go first, then the one expiring soonest.
    pub fn put(&mut self, key: K, value: V, now: Instant, ttl: Duration) {
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, (_, until)| now < *until);
            if self.entries.len() >= self.capacity {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(k, _)| k.clone());
                if let Some(k) = soonest {
                    self.entries.remove(&k);
                }
            }
        }
        self.entries.insert(key, (value, now + ttl));
    }

    /// How many entries are held (expired ones included until evicted).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The review answers reused between scrapes.
#[derive(Debug)]
pub struct Caches {
    /// Token reviews, by the token's hash.
    pub tokens: Expiring<TokenKey, Authn>,
    /// Access reviews.
    pub access: Expiring<AccessKey, Authz>,
}

impl Default for Caches {
    fn default() -> Self {
        Self {
            tokens: Expiring::new(CACHE_CAPACITY),
            access: Expiring::new(CACHE_CAPACITY),
        }
    }
}

impl Caches {
    /// Keeps a token review's answer; a failed review is not kept.
    pub fn put_token(&mut self, token: &str, review: &Result<Authn, ReviewFailed>, now: Instant) {
        if let Ok(a) = review {
            self.tokens.put(token_key(token), a.clone(), now, TOKEN_TTL);
        }
    }

    /// Keeps an access review's answer; a failed review is not kept.
    pub fn put_access(
        &mut self,
        key: AccessKey,
        review: &Result<Authz, ReviewFailed>,
        now: Instant,
    ) {
        let ttl = match review {
            Ok(Authz::Allowed) => ALLOW_TTL,
            Ok(Authz::Denied) => DENY_TTL,
            Err(_) => return,
        };
        if let Ok(a) = review {
            self.access.put(key, *a, now, ttl);
        }
    }
}

#[cfg(test)]
mod tests;
