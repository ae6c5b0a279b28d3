//! Keys as text: WireGuard's form (`wg genkey` / `wg pubkey`: 32 bytes as 44
//! characters of standard base64), random bytes from the kernel, and the
//! X25519 public key of a private one.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use boringtun::x25519::{PublicKey, StaticSecret};

pub fn to_base64(key: &[u8]) -> String {
    STANDARD.encode(key)
}

/// A key as `wg` writes it; the error says what is wrong with it.
pub fn parse(s: &str) -> Result<[u8; 32], String> {
    let t = s.trim();
    let bytes = STANDARD
        .decode(t)
        .map_err(|e| format!("\"{t}\" is not base64 ({e}); a WireGuard key is 44 characters as `wg genkey` prints them"))?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
        format!(
            "\"{t}\" decodes to {} bytes; a WireGuard key is 32 bytes (44 base64 characters)",
            bytes.len()
        )
    })
}

/// N bytes from the kernel's random source.
pub fn random<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut k = [0u8; N];
    let mut got = 0;
    while got < k.len() {
        // SAFETY: writes at most the rest of `k`.
        let n = unsafe { libc::getrandom(k[got..].as_mut_ptr().cast(), k.len() - got, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        got += n as usize;
    }
    Ok(k)
}

/// A new private key from the kernel's random source, clamped as `wg genkey`
/// clamps it.
pub fn generate() -> std::io::Result<[u8; 32]> {
    let mut k = random::<32>()?;
    k[0] &= 248;
    k[31] &= 127;
    k[31] |= 64;
    Ok(k)
}

pub fn public_of(private: &[u8; 32]) -> [u8; 32] {
    PublicKey::from(&StaticSecret::from(*private)).to_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7748_vector_gives_its_public_key() {
        // RFC 7748 section 6.1, Alice's keys.
        let private: [u8; 32] = (0..32)
            .map(|i| {
                u8::from_str_radix(
                    &"77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"
                        [2 * i..2 * i + 2],
                    16,
                )
                .unwrap()
            })
            .collect::<Vec<_>>()
            .try_into()
            .unwrap();
        let public = public_of(&private);
        assert_eq!(
            public
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
            "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
        );
        assert_eq!(parse(&to_base64(&public)).unwrap(), public);
    }

    #[test]
    fn bad_keys_say_what_is_wrong() {
        assert!(parse("abc").unwrap_err().contains("not base64"));
        assert!(parse("AAAA").unwrap_err().contains("3 bytes"));
        let k = generate().unwrap();
        assert_eq!(k[0] & 7, 0);
        assert_eq!(k[31] & 0xc0, 0x40);
        assert_ne!(generate().unwrap(), k);
    }
}
