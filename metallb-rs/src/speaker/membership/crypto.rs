//! The datagram envelope: every gossip datagram is encrypted and
//! authenticated with XChaCha20-Poly1305 under a key derived (HKDF-SHA256)
//! from the `memberlist` Secret.
//!
//! Layout: `version (1) | nonce (24) | ciphertext | tag (16)`.
//!
//! The nonce is random per datagram: XChaCha20's 192-bit nonce makes
//! random nonces safe for any number of datagrams a cluster will ever
//! send (collisions are negligible), so the speakers never have to
//! agree on counters. The version byte and the cluster label are
//! authenticated as associated data, so a datagram of another protocol
//! version or another cluster never opens as this one.
//!
//! Key rotation works as memberlist's keyring: datagrams are sealed with
//! the primary key and opened with any key of the ring (primary first),
//! so a new key is first added as accepted everywhere, then made
//! primary, then the old one removed.
//!
//! Replays are refused one layer up (the sealed stamp, see `replay`).

use chacha20poly1305::aead::{AeadInOut, Generate, KeyInit};
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};
use sha2::Sha256;

/// Envelope version written in the first byte of every datagram (2: the
/// plaintext starts with the sender's stamp, the key is HKDF-derived).
pub(crate) const VERSION: u8 = 2;
/// The shortest secret accepted: 128 bits of key material.
pub(crate) const MIN_SECRET: usize = 16;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
const HEADER_LEN: usize = 1 + NONCE_LEN;
/// Bytes the envelope adds to a plaintext.
pub(crate) const OVERHEAD: usize = HEADER_LEN + TAG_LEN;
/// HKDF info: binds the derived key to this use of the secret.
const KEY_INFO: &[u8] = b"metallb-rs membership key";
/// Associated data after the version byte, before the cluster label.
const AAD_PREFIX: &[u8] = b"metallb-rs membership";

/// HKDF-SHA256 (RFC 5869): `len` bytes (at most 255·32) of key material
/// from `ikm`.
fn hkdf_sha256(salt: &[u8], ikm: &[u8], info: &[u8], len: usize) -> Vec<u8> {
    let mut okm = vec![0u8; len];
    hkdf::Hkdf::<Sha256>::new(Some(salt), ikm)
        .expand(info, &mut okm)
        .expect("at most 255 blocks of key material are asked for");
    okm
}

/// The keys of a cluster: the primary one seals, every one opens.
#[derive(Clone, PartialEq, Eq)]
pub struct Keyring {
    primary: Vec<u8>,
    accepted: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Keyring {
    // Never print key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keyring(1 primary, {} accepted)", self.accepted.len())
    }
}

impl Keyring {
    /// A ring of the `primary` secret and other `accepted` ones (during a
    /// rotation); each secret must be at least 16 bytes.
    pub fn new(primary: Vec<u8>, accepted: Vec<Vec<u8>>) -> Result<Self, super::MembershipError> {
        for secret in std::iter::once(&primary).chain(&accepted) {
            if secret.len() < MIN_SECRET {
                return Err(super::MembershipError::ShortSecret(secret.len()));
            }
        }
        Ok(Self { primary, accepted })
    }

    /// The ring in a `memberlist` Secret's data: `secretkey` is the
    /// primary key, and every `secretkey-<anything>` an accepted one
    /// (put the next key there, then swap, to rotate without a split).
    pub fn from_secret_data<'a>(
        data: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<Self, super::MembershipError> {
        let mut primary = None;
        let mut accepted = Vec::new();
        for (key, value) in data {
            if key == PRIMARY_KEY {
                primary = Some(value.to_vec());
            } else if key
                .strip_prefix(PRIMARY_KEY)
                .is_some_and(|r| r.starts_with('-'))
            {
                accepted.push(value.to_vec());
            }
        }
        let primary = primary
            .filter(|p| !p.is_empty())
            .ok_or(super::MembershipError::EmptySecret)?;
        Self::new(primary, accepted)
    }
}

/// The Secret's key holding the primary gossip key (upstream's name).
const PRIMARY_KEY: &str = "secretkey";

/// Why a datagram could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OpenError {
    /// Too short to be an envelope: not one of ours, or cut short.
    #[error("datagram of {0} bytes is shorter than the {OVERHEAD}-byte envelope")]
    TooShort(usize),
    /// An envelope version this speaker does not speak.
    #[error(
        "unknown envelope version {0} (this speaker speaks {VERSION}): is a peer running another metallb-rs release?"
    )]
    Version(u8),
    /// Sealed with another key, or altered on the way.
    #[error(
        "authentication failed: the datagram was sealed with another memberlist secret, or altered"
    )]
    Auth,
}

/// Why a datagram could not be sealed.
#[derive(Debug, thiserror::Error)]
#[error("no randomness for a nonce from the operating system: {0}")]
pub(crate) struct SealError(String);

/// Seals and opens datagrams with the cluster's keys.
pub(crate) struct Cipher {
    /// The primary key first.
    aeads: Vec<XChaCha20Poly1305>,
    /// Version byte, prefix and cluster label.
    aad: Vec<u8>,
}

impl std::fmt::Debug for Cipher {
    // Never print key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cipher(XChaCha20-Poly1305, key elided)")
    }
}

impl Cipher {
    /// The cipher for `secret` alone and no cluster label (tests).
    #[cfg(test)]
    pub(crate) fn new(secret: &[u8]) -> Self {
        Self::with_keyring(
            &Keyring {
                primary: secret.to_vec(),
                accepted: Vec::new(),
            },
            "",
        )
    }

    /// The cipher for `keyring` and cluster `label`: each key is HKDF-SHA256
    /// of its secret (salted with the label), so a secret of any length
    /// (upstream's is 128 random bytes) gives a full-strength 256-bit key.
    pub(crate) fn with_keyring(keyring: &Keyring, label: &str) -> Self {
        let aeads = std::iter::once(&keyring.primary)
            .chain(&keyring.accepted)
            .map(|secret| {
                let mut key = [0u8; 32];
                key.copy_from_slice(&hkdf_sha256(label.as_bytes(), secret, KEY_INFO, 32));
                XChaCha20Poly1305::new(&key.into())
            })
            .collect();
        let mut aad = vec![VERSION];
        aad.extend_from_slice(AAD_PREFIX);
        aad.extend_from_slice(label.as_bytes());
        Self { aeads, aad }
    }

    /// `plaintext` sealed into one datagram, with a fresh random nonce.
    pub(crate) fn seal(&self, plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
        let nonce = XNonce::try_generate().map_err(|e| SealError(e.to_string()))?;
        let mut out = Vec::with_capacity(plaintext.len() + OVERHEAD);
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plaintext);
        let tag = self.aeads[0]
            .encrypt_inout_detached(&nonce, &self.aad, (&mut out[HEADER_LEN..]).into())
            // Only fails past XChaCha20's 256 GiB message limit, far above
            // any datagram; report it rather than panic all the same.
            .map_err(|e| SealError(format!("encryption failed: {e}")))?;
        out.extend_from_slice(&tag);
        Ok(out)
    }

    /// The plaintext of `datagram`, if it was sealed with this key and
    /// not altered.
    pub(crate) fn open(&self, datagram: &[u8]) -> Result<Vec<u8>, OpenError> {
        if datagram.len() < OVERHEAD {
            return Err(OpenError::TooShort(datagram.len()));
        }
        let (header, rest) = datagram.split_at(HEADER_LEN);
        if header[0] != VERSION {
            return Err(OpenError::Version(header[0]));
        }
        let nonce =
            XNonce::try_from(&header[1..]).map_err(|_| OpenError::TooShort(datagram.len()))?;
        let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
        let tag = Tag::try_from(tag).map_err(|_| OpenError::TooShort(datagram.len()))?;
        for aead in &self.aeads {
            let mut plaintext = ciphertext.to_vec();
            if aead
                .decrypt_inout_detached(&nonce, &self.aad, plaintext.as_mut_slice().into(), &tag)
                .is_ok()
            {
                return Ok(plaintext);
            }
        }
        Err(OpenError::Auth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let cipher = Cipher::new(b"secret");
        let sealed = cipher.seal(b"hello").expect("seal");
        assert_eq!(sealed.len(), 5 + OVERHEAD);
        assert_eq!(sealed[0], VERSION);
        assert_eq!(cipher.open(&sealed), Ok(b"hello".to_vec()));
    }

    #[test]
    fn empty_plaintext_round_trips() {
        let cipher = Cipher::new(b"secret");
        let sealed = cipher.seal(b"").expect("seal");
        assert_eq!(cipher.open(&sealed), Ok(Vec::new()));
    }

    #[test]
    fn nonces_differ_per_datagram() {
        let cipher = Cipher::new(b"secret");
        let a = cipher.seal(b"same").expect("seal");
        let b = cipher.seal(b"same").expect("seal");
        assert_ne!(a[1..HEADER_LEN], b[1..HEADER_LEN]);
        assert_ne!(a, b);
    }

    #[test]
    fn other_key_fails_authentication() {
        let sealed = Cipher::new(b"one").seal(b"hello").expect("seal");
        assert_eq!(Cipher::new(b"two").open(&sealed), Err(OpenError::Auth));
    }

    #[test]
    fn short_and_foreign_datagrams_are_rejected() {
        let cipher = Cipher::new(b"secret");
        assert_eq!(cipher.open(&[]), Err(OpenError::TooShort(0)));
        assert_eq!(cipher.open(&[VERSION; 10]), Err(OpenError::TooShort(10)));
        let mut sealed = cipher.seal(b"hello").expect("seal");
        sealed[0] = 7;
        assert_eq!(cipher.open(&sealed), Err(OpenError::Version(7)));
    }

    #[test]
    fn hkdf_matches_rfc_5869() {
        // RFC 5869 appendix A.1.
        let ikm = [0x0b; 22];
        let salt: Vec<u8> = (0..=0x0c).collect();
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let okm = hkdf_sha256(&salt, &ikm, &info, 42);
        let want =
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865";
        let got: String = okm.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got, want);
        // A.3: no salt, no info.
        let okm = hkdf_sha256(&[], &ikm, &[], 42);
        let got: String = okm.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            got,
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
        );
    }

    #[test]
    fn the_key_is_not_the_plain_hash_of_the_secret() {
        let sealed = Cipher::new(b"secret").seal(b"hello").expect("seal");
        let key = <Sha256 as sha2::Digest>::digest(b"secret");
        let old = XChaCha20Poly1305::new(&key);
        let (header, rest) = sealed.split_at(HEADER_LEN);
        let nonce = XNonce::try_from(&header[1..]).expect("nonce");
        let (ct, tag) = rest.split_at(rest.len() - TAG_LEN);
        let mut pt = ct.to_vec();
        let tag = Tag::try_from(tag).expect("tag");
        assert!(
            old.decrypt_inout_detached(
                &nonce,
                &Cipher::new(b"secret").aad,
                pt.as_mut_slice().into(),
                &tag
            )
            .is_err()
        );
    }

    #[test]
    fn another_cluster_label_does_not_open() {
        let ring = Keyring::new(vec![7; 16], vec![]).expect("ring");
        let sealed = Cipher::with_keyring(&ring, "blue")
            .seal(b"hello")
            .expect("seal");
        assert_eq!(
            Cipher::with_keyring(&ring, "blue").open(&sealed),
            Ok(b"hello".to_vec())
        );
        assert_eq!(
            Cipher::with_keyring(&ring, "green").open(&sealed),
            Err(OpenError::Auth)
        );
        assert_eq!(
            Cipher::with_keyring(&ring, "").open(&sealed),
            Err(OpenError::Auth)
        );
    }

    #[test]
    fn the_version_byte_is_authenticated() {
        let cipher = Cipher::new(b"secret");
        let sealed = cipher.seal(b"hello").expect("seal");
        // The same bytes under another version: refused as that version,
        // and the AAD carries the version so no version can reuse them.
        assert_eq!(cipher.aad[0], VERSION);
        let mut other = sealed.clone();
        other[0] = VERSION + 1;
        assert_eq!(cipher.open(&other), Err(OpenError::Version(VERSION + 1)));
    }

    #[test]
    fn a_keyring_seals_with_its_primary_and_opens_with_any_key() {
        let (old, new) = (vec![1; 16], vec![2; 16]);
        let before = Cipher::with_keyring(&Keyring::new(old.clone(), vec![]).expect("ring"), "");
        let during = Cipher::with_keyring(
            &Keyring::new(new.clone(), vec![old.clone()]).expect("ring"),
            "",
        );
        let after = Cipher::with_keyring(&Keyring::new(new.clone(), vec![]).expect("ring"), "");
        let from_before = before.seal(b"a").expect("seal");
        let from_during = during.seal(b"b").expect("seal");
        assert_eq!(during.open(&from_before), Ok(b"a".to_vec()));
        assert_eq!(after.open(&from_during), Ok(b"b".to_vec()));
        assert_eq!(before.open(&from_during), Err(OpenError::Auth));
        assert_eq!(after.open(&from_before), Err(OpenError::Auth));
    }

    #[test]
    fn a_keyring_is_read_from_the_secret_data() {
        let data: [(&str, &[u8]); 4] = [
            ("secretkey", &[1; 16]),
            ("secretkey-next", &[2; 16]),
            ("secretkeyish", &[3; 2]),
            ("other", &[4; 2]),
        ];
        let ring = Keyring::from_secret_data(data).expect("ring");
        assert_eq!(
            ring,
            Keyring::new(vec![1; 16], vec![vec![2; 16]]).expect("ring")
        );
        let only_accepted: [(&str, &[u8]); 1] = [("secretkey-next", &[2; 16])];
        assert!(Keyring::from_secret_data(only_accepted).is_err());
        let short: [(&str, &[u8]); 1] = [("secretkey", &[2; 8])];
        assert!(Keyring::from_secret_data(short).is_err());
    }

    #[test]
    fn short_secrets_are_refused_with_what_to_do() {
        let err = Keyring::new(vec![1; 15], vec![]).expect_err("15 bytes");
        assert!(err.to_string().contains("at least 16"), "{err}");
        assert!(Keyring::new(vec![1; 16], vec![vec![2; 3]]).is_err());
        assert!(Keyring::new(vec![1; 16], vec![vec![2; 16]]).is_ok());
    }

    #[test]
    fn errors_say_what_to_check() {
        assert!(OpenError::Auth.to_string().contains("memberlist secret"));
        assert!(OpenError::Version(3).to_string().contains("release"));
    }

    proptest! {
        #[test]
        fn seal_open_round_trip(secret in proptest::collection::vec(any::<u8>(), 1..64),
                                plaintext in proptest::collection::vec(any::<u8>(), 0..1500)) {
            let cipher = Cipher::new(&secret);
            let sealed = cipher.seal(&plaintext).expect("seal");
            prop_assert_eq!(sealed.len(), plaintext.len() + OVERHEAD);
            prop_assert_eq!(cipher.open(&sealed), Ok(plaintext));
        }

        /// Any single flipped bit, anywhere (version, nonce, ciphertext,
        /// tag), makes the datagram unopenable.
        #[test]
        fn any_bit_flip_is_detected(plaintext in proptest::collection::vec(any::<u8>(), 0..256),
                                    position in any::<prop::sample::Index>(),
                                    bit in 0u8..8) {
            let cipher = Cipher::new(b"secret");
            let mut sealed = cipher.seal(&plaintext).expect("seal");
            let at = position.index(sealed.len());
            sealed[at] ^= 1 << bit;
            prop_assert!(cipher.open(&sealed).is_err());
        }

        /// Cutting a datagram short, by any amount, is detected.
        #[test]
        fn truncation_is_detected(plaintext in proptest::collection::vec(any::<u8>(), 0..256),
                                  cut in any::<prop::sample::Index>()) {
            let cipher = Cipher::new(b"secret");
            let sealed = cipher.seal(&plaintext).expect("seal");
            let len = cut.index(sealed.len());
            prop_assert!(cipher.open(&sealed[..len]).is_err());
        }

        /// Arbitrary bytes never open (and never panic).
        #[test]
        fn garbage_never_opens(garbage in proptest::collection::vec(any::<u8>(), 0..512)) {
            prop_assert!(Cipher::new(b"secret").open(&garbage).is_err());
        }
    }
}
