//! The datagram envelope: every gossip datagram is encrypted and
//! authenticated with XChaCha20-Poly1305 under a key derived from the
//! `memberlist` Secret.
//!
//! Layout: `version (1) | nonce (24) | ciphertext | tag (16)`.
//!
//! The nonce is random per datagram: XChaCha20's 192-bit nonce makes
//! random nonces safe for any number of datagrams a cluster will ever
//! send (collisions are negligible), so the speakers never have to
//! agree on counters. The version byte and a fixed label are
//! authenticated as associated data, so a datagram of another protocol
//! version or another purpose never opens as this one.
//!
//! There is no replay window: a replayed datagram is a SWIM message
//! seen twice, which the protocol already tolerates (probes carry probe
//! numbers, member states are ordered by identity and incarnation, and
//! a leave only concerns the identity that left, never a newer one).

use chacha20poly1305::aead::{AeadInOut, Generate, KeyInit};
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};

/// Envelope version written in the first byte of every datagram.
pub(crate) const VERSION: u8 = 1;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
const HEADER_LEN: usize = 1 + NONCE_LEN;
/// Bytes the envelope adds to a plaintext.
pub(crate) const OVERHEAD: usize = HEADER_LEN + TAG_LEN;
/// Associated data: binds every datagram to this protocol and version.
const AAD: &[u8] = b"metallb-rs membership v1";

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

/// Seals and opens datagrams with the cluster key.
pub(crate) struct Cipher {
    aead: XChaCha20Poly1305,
}

impl std::fmt::Debug for Cipher {
    // Never print key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cipher(XChaCha20-Poly1305, key elided)")
    }
}

impl Cipher {
    /// The cipher for `secret`: the key is SHA-256 of the secret bytes,
    /// so a secret of any length (upstream's is 128 random bytes) gives
    /// a full-strength 256-bit key.
    pub(crate) fn new(secret: &[u8]) -> Self {
        let key = Sha256::digest(secret);
        Self {
            aead: XChaCha20Poly1305::new(&key),
        }
    }

    /// `plaintext` sealed into one datagram, with a fresh random nonce.
    pub(crate) fn seal(&self, plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
        let nonce = XNonce::try_generate().map_err(|e| SealError(e.to_string()))?;
        let mut out = Vec::with_capacity(plaintext.len() + OVERHEAD);
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plaintext);
        let tag = self
            .aead
            .encrypt_inout_detached(&nonce, AAD, (&mut out[HEADER_LEN..]).into())
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
        let mut plaintext = ciphertext.to_vec();
        self.aead
            .decrypt_inout_detached(&nonce, AAD, plaintext.as_mut_slice().into(), &tag)
            .map_err(|_| OpenError::Auth)?;
        Ok(plaintext)
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
    fn errors_say_what_to_check() {
        assert!(OpenError::Auth.to_string().contains("memberlist secret"));
        assert!(OpenError::Version(2).to_string().contains("release"));
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
