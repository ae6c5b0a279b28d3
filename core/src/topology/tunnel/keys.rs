//! What the kinds key their ends with: a preshared key, and the static ESP
//! SAs that ESP and L2TP/IPsec share (UDP 4500 or raw, anti-replay window,
//! SPIs and key material), as written and resolved.

use super::ends::RawEnd;
use crate::topology::{KeyPath, Problem, int_in};

/// ESP in UDP (RFC 3948): the port of SAs that travel in UDP.
pub const ESP_PORT: u16 = 4500;

/// A preshared key: none, one made per lab, or given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preshared {
    None,
    Generate,
    Given([u8; 32]),
}

impl serde::Serialize for Preshared {
    // Never the key itself: resolved topologies are printed.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            Preshared::None => "none",
            Preshared::Generate => "generated",
            Preshared::Given(_) => "given",
        })
    }
}

/// The SAs between two ends, as the topology gives them (keys are the lab's).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sas {
    /// In UDP 4500 (RFC 3948), else raw protocol 50.
    pub udp: bool,
    pub window: u32,
    /// The SPI each end receives on.
    pub spis: Vec<u32>,
    /// The key material of the SA into each end, where the file gives it.
    #[serde(skip)]
    pub keys: Vec<Option<[u8; 20]>>,
}

/// How ESP travels and its anti-replay window: (UDP 4500?, window).
pub fn sa_settings(
    encap: Option<&str>,
    window: Option<i64>,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> (bool, u32) {
    let udp = match encap {
        None | Some("udp") => true,
        Some("raw") => false,
        Some(o) => {
            p.push(Problem::new(&at.key("encap"), format!("encap \"{o}\" is not one of \"udp\" (RFC 3948, port 4500), \"raw\" (protocol 50)")));
            true
        }
    };
    let window = int_in(window, 32..=4096, 64, &at.key("window"), p, |w| {
        format!("window {w}; use 32..=4096 packets (default 64)")
    }) as u32;
    (udp, window)
}

/// The SPI each end receives on: given, or 0x1000 + its index; never both
/// the same.
pub fn spis(ends: &[RawEnd], at: &KeyPath, p: &mut Vec<Problem>) -> Vec<u32> {
    let spis: Vec<u32> = ends
        .iter()
        .enumerate()
        .map(|(i, re)| {
            int_in(
                re.spi,
                256..=u32::MAX as i64,
                0x1000 + i as i64,
                &at.key("ends").index(i).key("spi"),
                p,
                |s| {
                    format!(
                        "SPI {s}; use 256..=4294967295 (0 and 1-255 are reserved, RFC 4303 2.1)"
                    )
                },
            ) as u32
        })
        .collect();
    if spis.len() == 2 && spis[0] == spis[1] {
        p.push(Problem::new(
            &at.key("ends").index(1).key("spi"),
            "both ends receive on the same SPI; give each its own",
        ));
    }
    spis
}

/// The SA keys the file gives, per end: 40 hex digits each, the two ends'
/// different (an SA's key is its own).
pub fn sa_keys(ends: &[RawEnd], at: &KeyPath, p: &mut Vec<Problem>) -> Vec<Option<[u8; 20]>> {
    let keys: Vec<Option<[u8; 20]>> = ends
        .iter()
        .enumerate()
        .map(|(i, re)| {
            let text = re.sa_key.as_deref()?;
            let key = parse_sa_key(text);
            if key.is_none() {
                p.push(Problem::new(
                    &at.key("ends").index(i).key("sa_key"),
                    "sa_key must be 40 hex digits: AES-GCM-128's 16-byte key and 4-byte salt (`openssl rand -hex 20` makes one)",
                ));
            }
            key
        })
        .collect();
    if keys.len() == 2 && keys[0].is_some() && keys[0] == keys[1] {
        p.push(Problem::new(
            &at.key("ends").index(1).key("sa_key"),
            "both ends have the same sa_key; give each SA its own",
        ));
    }
    keys
}

fn parse_sa_key(text: &str) -> Option<[u8; 20]> {
    if text.len() != 40 || !text.is_ascii() {
        return None;
    }
    let mut k = [0u8; 20];
    for (i, b) in k.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(k)
}
