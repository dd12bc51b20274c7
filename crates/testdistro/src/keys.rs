//! Deterministic OpenPGP signing keys for the fixture repositories.
//!
//! The fixture must be byte-identical on every machine, so its keys are
//! derived from a fixed seed and a fixed creation time rather than from the
//! system's entropy and clock. They sign fixture packages only: nothing here
//! is, or must ever be used as, a secret.

use anyhow::{Context, Result};
use pgp::composed::{KeyType, SecretKeyParamsBuilder, SignedPublicKey, SignedSecretKey};
use pgp::packet::PacketTrait;
use pgp::packet::{SignatureConfig, SignatureType, Subpacket, SubpacketData};
use pgp::types::{KeyDetails, Password, Timestamp};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// 2022-05-10T00:00:00Z, the day RHEL 8.6 shipped: the keys' creation time.
const KEY_CREATED: u32 = 1_652_140_800;

/// A fixture signing key: the armored secret (for the rpm signer) and public
/// key (what a `.repo` file's `gpgkey=` and an `inputs.keys` policy name).
#[derive(Clone, Debug)]
pub struct FixtureKey {
    /// The user id, e.g. `strata fixture RHEL release key <...>`.
    pub user_id: String,
    pub secret_asc: String,
    pub public_asc: String,
    /// Upper-case hex v4 fingerprint.
    pub fingerprint: String,
}

impl FixtureKey {
    /// Derives the key named `user_id` from `seed`: same seed, same bytes.
    pub fn derive(seed: &str, user_id: &str) -> Result<Self> {
        let seed_bytes: [u8; 32] = sha2_256(seed.as_bytes());
        let mut rng = ChaCha20Rng::from_seed(seed_bytes);
        let created = Timestamp::from_secs(KEY_CREATED);
        let params = SecretKeyParamsBuilder::default()
            .key_type(KeyType::Rsa(2048))
            .can_certify(true)
            .can_sign(true)
            .created_at(created)
            .primary_user_id(user_id.to_string())
            .build()
            .context("fixture key parameters")?;
        let mut key = params
            .generate(&mut rng)
            .context("generating fixture key")?;
        resign_user_ids(&mut key, created, &mut rng)?;
        let public = SignedPublicKey::from(key.clone());
        let opts = Default::default();
        Ok(Self {
            user_id: user_id.to_string(),
            secret_asc: key.to_armored_string(opts).context("armoring secret key")?,
            public_asc: public
                .to_armored_string(Default::default())
                .context("armoring public key")?,
            fingerprint: hex::encode_upper(key.fingerprint().as_bytes()),
        })
    }
}

/// The key generator stamps self-signatures with the current time; replace
/// them with signatures made at the key's creation time.
fn resign_user_ids(key: &mut SignedSecretKey, at: Timestamp, rng: &mut ChaCha20Rng) -> Result<()> {
    let primary = key.primary_key.clone();
    let public = primary.public_key().clone();
    for user in &mut key.details.users {
        let old = user
            .signatures
            .first()
            .context("user id without self-signature")?;
        let mut config =
            SignatureConfig::from_key(&mut *rng, &primary, SignatureType::CertPositive)?;
        config.hashed_subpackets = old
            .config()
            .context("self-signature without config")?
            .hashed_subpackets
            .iter()
            .map(|sp| match sp.data {
                SubpacketData::SignatureCreationTime(_) => {
                    Subpacket::regular(SubpacketData::SignatureCreationTime(at))
                }
                _ => Ok(sp.clone()),
            })
            .collect::<Result<_, _>>()?;
        config.unhashed_subpackets = old
            .config()
            .map(|c| c.unhashed_subpackets.clone())
            .unwrap_or_default();
        let sig = config.sign_certification(
            &primary,
            &public,
            &Password::empty(),
            user.id.tag(),
            &user.id,
        )?;
        user.signatures = vec![sig];
    }
    Ok(())
}

fn sha2_256(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(data).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_key_bytes() {
        let a = FixtureKey::derive("seed-a", "A <a@example.invalid>").unwrap();
        let b = FixtureKey::derive("seed-a", "A <a@example.invalid>").unwrap();
        assert_eq!(a.public_asc, b.public_asc);
        assert_eq!(a.secret_asc, b.secret_asc);
        assert_eq!(a.fingerprint.len(), 40);
        let c = FixtureKey::derive("seed-c", "A <a@example.invalid>").unwrap();
        assert_ne!(a.fingerprint, c.fingerprint);
    }
}
