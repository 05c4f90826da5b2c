//! Who may read the metrics, table by table; the caches' lifetimes,
//! keys and bounds.

use super::*;

fn user(name: &str) -> User {
    User {
        name: name.to_owned(),
        uid: "u-1".to_owned(),
        groups: vec!["b".to_owned(), "a".to_owned()],
        extra: BTreeMap::from([("k".to_owned(), vec!["2".to_owned(), "1".to_owned()])]),
    }
}

/// The steps run in order with the given review outcomes; the answer and
/// the reviews that were asked for, as text.
fn check(
    header: Option<&str>,
    authn: Result<Authn, ReviewFailed>,
    authz: Result<Authz, ReviewFailed>,
) -> String {
    let mut asked = Vec::new();
    let steps = || -> Result<Answer, Answer> {
        let token = token(header.map(str::as_bytes))?;
        asked.push(format!("tokenreview({token})"));
        let user = authenticated(authn)?;
        asked.push(format!("subjectaccessreview({})", user.name));
        Ok(authorized(&user, authz))
    };
    let (Ok(answer) | Err(answer)) = steps();
    let answer = match answer {
        Answer::Serve => "200".to_owned(),
        Answer::Refuse { status, body } => format!("{status} {body}"),
    };
    format!("{answer} [{}]", asked.join(", "))
}

fn failed() -> ReviewFailed {
    ReviewFailed("connection refused".into())
}

#[rstest::rstest]
#[case::no_header(
    None,
    Ok(Authn::Unauthenticated),
    Ok(Authz::Allowed),
    "401 Unauthorized []"
)]
#[case::not_bearer(
    Some("Basic dXNlcjpwdw=="),
    Ok(Authn::Authenticated(user("alice"))),
    Ok(Authz::Allowed),
    "401 Unauthorized []"
)]
#[case::empty_token(
    Some("Bearer   "),
    Ok(Authn::Authenticated(user("alice"))),
    Ok(Authz::Allowed),
    "401 Unauthorized []"
)]
#[case::no_token(
    Some("Bearer"),
    Ok(Authn::Authenticated(user("alice"))),
    Ok(Authz::Allowed),
    "401 Unauthorized []"
)]
#[case::unauthenticated(
    Some("Bearer t0k"),
    Ok(Authn::Unauthenticated),
    Ok(Authz::Allowed),
    "401 Unauthorized [tokenreview(t0k)]"
)]
#[case::token_review_failed(
    Some("Bearer t0k"),
    Err(failed()),
    Ok(Authz::Allowed),
    "500 Authentication failed [tokenreview(t0k)]"
)]
#[case::allowed(
    Some("Bearer t0k"),
    Ok(Authn::Authenticated(user("alice"))),
    Ok(Authz::Allowed),
    "200 [tokenreview(t0k), subjectaccessreview(alice)]"
)]
#[case::scheme_in_any_case(
    Some("bEaReR t0k"),
    Ok(Authn::Authenticated(user("alice"))),
    Ok(Authz::Allowed),
    "200 [tokenreview(t0k), subjectaccessreview(alice)]"
)]
#[case::denied(
    Some("Bearer t0k"),
    Ok(Authn::Authenticated(user("alice"))),
    Ok(Authz::Denied),
    "403 Authorization denied for user alice [tokenreview(t0k), subjectaccessreview(alice)]"
)]
#[case::access_review_failed(
    Some("Bearer t0k"),
    Ok(Authn::Authenticated(user("alice"))),
    Err(failed()),
    "500 Authorization for user alice failed [tokenreview(t0k), subjectaccessreview(alice)]"
)]
fn who_reads_the_metrics(
    #[case] header: Option<&str>,
    #[case] authn: Result<Authn, ReviewFailed>,
    #[case] authz: Result<Authz, ReviewFailed>,
    #[case] want: &str,
) {
    assert_eq!(check(header, authn, authz), want);
}

#[test]
fn a_failed_review_never_shows_its_reason() {
    let Err(Answer::Refuse { body, .. }) = authenticated(Err(failed())) else {
        panic!("not refused");
    };
    assert!(!body.contains("refused"), "{body}");
}

fn secs(t0: Instant, s: u64) -> Instant {
    t0 + Duration::from_secs(s)
}

#[test]
fn token_answers_live_a_minute_either_way_and_errors_are_not_kept() {
    let t0 = Instant::now();
    let mut c = Caches::default();
    let alice = Authn::Authenticated(user("alice"));
    c.put_token("good", &Ok(alice.clone()), t0);
    c.put_token("bad", &Ok(Authn::Unauthenticated), t0);
    c.put_token("flaky", &Err(failed()), t0);
    let get = |c: &Caches, t: &str, s| c.tokens.get(&token_key(t), secs(t0, s));
    assert_eq!(get(&c, "good", 59), Some(alice));
    assert_eq!(get(&c, "bad", 59), Some(Authn::Unauthenticated));
    assert_eq!(get(&c, "good", 60), None);
    assert_eq!(get(&c, "bad", 60), None);
    assert_eq!(get(&c, "flaky", 0), None);
    assert_eq!(c.tokens.len(), 2);
}

#[test]
fn tokens_are_kept_only_as_their_hash() {
    let mut c = Caches::default();
    c.put_token("s3cret-token", &Ok(Authn::Unauthenticated), Instant::now());
    assert!(!format!("{c:?}").contains("s3cret-token"));
    assert_eq!(token_key("a"), token_key("a"));
    assert_ne!(token_key("a"), token_key("b"));
}

#[test]
fn access_allow_lives_five_minutes_deny_thirty_seconds_errors_not_at_all() {
    let t0 = Instant::now();
    let mut c = Caches::default();
    let allowed = AccessKey::new(&user("alice"), "GET", "/metrics");
    let denied = AccessKey::new(&user("bob"), "GET", "/metrics");
    let flaky = AccessKey::new(&user("carol"), "GET", "/metrics");
    c.put_access(allowed.clone(), &Ok(Authz::Allowed), t0);
    c.put_access(denied.clone(), &Ok(Authz::Denied), t0);
    c.put_access(flaky.clone(), &Err(failed()), t0);
    assert_eq!(c.access.get(&allowed, secs(t0, 299)), Some(Authz::Allowed));
    assert_eq!(c.access.get(&allowed, secs(t0, 300)), None);
    assert_eq!(c.access.get(&denied, secs(t0, 29)), Some(Authz::Denied));
    assert_eq!(c.access.get(&denied, secs(t0, 30)), None);
    assert_eq!(c.access.get(&flaky, t0), None);
}

#[test]
fn access_keys_ignore_group_order_but_not_verb_path_or_uid() {
    let a = user("alice");
    let mut reordered = a.clone();
    reordered.groups.reverse();
    reordered
        .extra
        .insert("k".into(), vec!["1".into(), "2".into()]);
    assert_eq!(
        AccessKey::new(&a, "GET", "/metrics"),
        AccessKey::new(&reordered, "get", "/metrics")
    );
    assert_eq!(AccessKey::new(&a, "GET", "/metrics").verb(), "get");
    assert_ne!(
        AccessKey::new(&a, "GET", "/metrics"),
        AccessKey::new(&a, "GET", "/metrics/x")
    );
    assert_ne!(
        AccessKey::new(&a, "GET", "/metrics"),
        AccessKey::new(&a, "POST", "/metrics")
    );
    let mut other_uid = a.clone();
    other_uid.uid = "u-2".into();
    assert_ne!(
        AccessKey::new(&a, "GET", "/metrics"),
        AccessKey::new(&other_uid, "GET", "/metrics")
    );
}

#[test]
fn a_full_map_drops_the_expired_first_then_the_soonest_expiring() {
    let t0 = Instant::now();
    let mut m = Expiring::new(3);
    m.put("short", 1, t0, Duration::from_secs(10));
    m.put("long", 2, t0, Duration::from_secs(100));
    m.put("mid", 3, t0, Duration::from_secs(50));
    // Full, none expired: the soonest-expiring goes.
    m.put("new", 4, t0, Duration::from_secs(60));
    assert_eq!(m.len(), 3);
    assert_eq!(m.get(&"short", t0), None);
    assert_eq!(m.get(&"mid", t0), Some(3));
    // Later, "mid" has expired: it goes, though "new" expires before "long".
    let later = secs(t0, 55);
    m.put("newer", 5, later, Duration::from_secs(1));
    assert_eq!(m.len(), 3);
    assert_eq!(m.get(&"long", later), Some(2));
    assert_eq!(m.get(&"new", later), Some(4));
    assert_eq!(m.get(&"newer", later), Some(5));
    // Replacing a key never evicts another.
    m.put("long", 6, later, Duration::from_secs(1));
    assert_eq!(m.len(), 3);
}

#[test]
fn caches_hold_at_most_their_capacity() {
    let t0 = Instant::now();
    let mut c = Caches::default();
    for i in 0..(CACHE_CAPACITY + 100) {
        c.put_token(&format!("t{i}"), &Ok(Authn::Unauthenticated), t0);
        c.put_access(
            AccessKey::new(&user(&format!("u{i}")), "GET", "/metrics"),
            &Ok(Authz::Denied),
            t0,
        );
    }
    assert_eq!(c.tokens.len(), CACHE_CAPACITY);
    assert_eq!(c.access.len(), CACHE_CAPACITY);
}
