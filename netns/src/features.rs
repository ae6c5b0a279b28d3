//! What this kernel can do that a lab may ask for, found by trying it where
//! nothing can see: in a network namespace of a thread's own (unshared, never
//! named), which the kernel frees when the thread ends.
//!
//! Kernels differ in what they were built with, and a lab that needs a missing
//! piece must be refused before anything is built, naming the piece (such as
//! CONFIG_IPV6_SEG6_LWTUNNEL, which the kernel DS-Lite datapath is made of),
//! not fail half-way with a bare errno.

use std::sync::OnceLock;

/// Whether routes with seg6 (encap.red) and seg6local (End.DX4) encapsulation
/// can be made: the kernel DS-Lite datapath's B4 and AFTR. Probed once per
/// process.
pub fn seg6_lwtunnel() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| probe_seg6().unwrap_or(false))
}

/// Both route kinds in a throwaway namespace; Ok(false) when the kernel says it
/// has no such encapsulation (EOPNOTSUPP), an error when the probe itself fails.
fn probe_seg6() -> std::io::Result<bool> {
    std::thread::spawn(|| -> std::io::Result<bool> {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            let (conn, h, _) = rtnetlink::new_connection()?;
            tokio::spawn(conn);
            // lo is index 1 in every namespace; routes need their device up.
            let lo = 1;
            h.link()
                .set(rtnetlink::LinkUnspec::new_with_index(lo).up().build())
                .execute()
                .await
                .map_err(|e| std::io::Error::other(crate::netlink::reason(e)))?;
            let sid = std::net::Ipv6Addr::new(0x2001, 2, 0, 0xff, 0, 0, 0, 1);
            let to = ipnetwork::Ipv4Network::new(std::net::Ipv4Addr::new(198, 18, 255, 0), 24)
                .expect("a /24");
            for m in [
                crate::apply::seg6local_message(sid, lo, 254),
                crate::apply::seg6_encap_message(to, sid, lo, 254),
            ] {
                match h.route().add(m).execute().await {
                    Ok(()) => {}
                    Err(e) if crate::netlink::errno(&e) == Some(libc::EOPNOTSUPP) => {
                        return Ok(false);
                    }
                    Err(e) => return Err(std::io::Error::other(crate::netlink::reason(e))),
                }
            }
            Ok(true)
        })
    })
    .join()
    .unwrap_or_else(|_| Err(std::io::Error::other("the probe thread panicked")))
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
        assert_eq!(
            probe_seg6().expect("probe"),
            made.status.success(),
            "ip said: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        // The probe's namespace was its thread's own: nothing named is left.
        assert!(!crate::namespace::list().iter().any(|n| n == &ns));
    }
}
