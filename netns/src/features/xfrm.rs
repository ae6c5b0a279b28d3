//! Kernel ESP: what strongSwan's kernel datapath (charon's kernel-netlink)
//! installs, an ESP tunnel-mode state with AES-GCM (rfc4106) and a policy, over
//! IPv4 and IPv6, tried through `ip xfrm` as a batch.

use super::Found;
use super::sandbox::in_throwaway_namespace;
use crate::tool::{Tool, ToolFailure};

const IP_BATCH: Tool = Tool {
    program: "ip",
    args: &["-batch", "-"],
    package: "iproute2",
    input: "the xfrm batch",
};

/// The key is 16 bytes of AES-128 and 4 of salt, as charon gives the kernel.
const KEY: &str = "0x0102030405060708090a0b0c0d0e0f1011121314";

fn batch() -> String {
    let mut s = String::new();
    for (src, dst) in [
        ("198.18.255.1", "198.18.255.2"),
        ("2001:2:0:ff::1", "2001:2:0:ff::2"),
    ] {
        s += &format!(
            "xfrm state add src {src} dst {dst} proto esp spi 0x100 reqid 1 mode tunnel aead 'rfc4106(gcm(aes))' {KEY} 128\n"
        );
        s += &format!(
            "xfrm policy add src {src} dst {dst} dir out tmpl src {src} dst {dst} proto esp reqid 1 mode tunnel\n"
        );
    }
    s
}

pub(super) fn probe() -> Found {
    in_throwaway_namespace(|| match IP_BATCH.run_here(&batch()) {
        Ok(()) => Found::Present,
        Err(ToolFailure::Refused(m)) => Found::Absent(m),
        Err(f) => Found::Unknown(f.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Agrees with the kernel's own list of ESP algorithms: where the probe
    /// says present, the AEAD it asked for is one the kernel's crypto has.
    #[test]
    fn xfrm_probe_agrees_with_the_kernels_crypto() {
        let found = probe();
        assert!(
            !matches!(found, Found::Unknown(_)),
            "the probe could not tell: {found:?}"
        );
        let crypto = std::fs::read_to_string("/proc/crypto").unwrap_or_default();
        if found == Found::Present {
            assert!(crypto.contains("rfc4106(gcm(aes))"), "{crypto}");
        } else {
            let Found::Absent(why) = &found else {
                unreachable!()
            };
            assert!(why.starts_with("ip refused the xfrm batch"), "{why}");
        }
    }
}
