//! SRv6 lightweight tunnels: the two route kinds the kernel DS-Lite datapath
//! is made of (seg6 encap.red at the B4, seg6local End.DX4 at the AFTR).

use super::Found;
use super::sandbox::{LO, in_throwaway_namespace, lo_up, verdict, with_netlink};

/// Both route kinds in a throwaway namespace, on lo.
pub(super) fn probe() -> Found {
    in_throwaway_namespace(|| {
        with_netlink(|h| async move {
            if let Err(f) = lo_up(&h).await {
                return f;
            }
            let sid = std::net::Ipv6Addr::new(0x2001, 2, 0, 0xff, 0, 0, 0, 1);
            let to = ipnetwork::Ipv4Network::new(std::net::Ipv4Addr::new(198, 18, 255, 0), 24)
                .expect("a /24");
            for m in [
                crate::apply::seg6local_message(sid, LO, 254),
                crate::apply::seg6_encap_message(to, sid, LO, 254),
            ] {
                if let Err(e) = h.route().add(m).execute().await {
                    return verdict(e);
                }
            }
            Found::Present
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Agrees with what `ip` can make (run as root, like every netns test).
    #[test]
    fn seg6_probe_agrees_with_ip() {
        let ns = format!("featprobe{}", std::process::id());
        let ip = |args: &[&str]| {
            std::process::Command::new("ip")
                .args(args)
                .output()
                .expect("ip")
        };
        assert!(ip(&["netns", "add", &ns]).status.success());
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        let made = ip(&[
            "-n",
            &ns,
            "-6",
            "route",
            "add",
            "2001:2:0:ff::1/128",
            "encap",
            "seg6local",
            "action",
            "End.DX4",
            "nh4",
            "0.0.0.0",
            "dev",
            "lo",
        ]);
        ip(&["netns", "del", &ns]);
        let found = probe();
        assert!(
            !matches!(found, Found::Unknown(_)),
            "the probe could not tell: {found:?}"
        );
        assert_eq!(
            found == Found::Present,
            made.status.success(),
            "probe {found:?}; ip said: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        // The probe's namespace was its thread's own: nothing named is left.
        assert!(!crate::namespace::list().iter().any(|n| n == &ns));
    }
}
