//! Where a probe runs: a fresh thread that unshares its network namespace, so
//! whatever it makes (devices, routes, qdiscs, rulesets, sockets) lives in a
//! namespace nobody named and the kernel frees when the thread ends.

use super::Found;
use rtnetlink::Handle;
use std::future::Future;

/// Runs `probe` on a thread of its own in a new, empty network namespace (lo
/// down). The programs it starts inherit that namespace.
pub fn in_throwaway_namespace(probe: impl FnOnce() -> Found + Send) -> Found {
    std::thread::scope(|s| {
        s.spawn(
            || match nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET) {
                Ok(()) => probe(),
                Err(e) => Found::Unknown(cannot_unshare(e)),
            },
        )
        .join()
        .unwrap_or_else(|_| Found::Unknown("the probe thread panicked".into()))
    })
}

/// Why no throwaway namespace could be made, in a user's words.
pub(super) fn cannot_unshare(e: nix::Error) -> String {
    match e {
        nix::Error::EPERM => {
            "cannot make a network namespace: not permitted (tunbench needs root: CAP_SYS_ADMIN and CAP_NET_ADMIN)".into()
        }
        e => format!("cannot make a network namespace: {}", e.desc()),
    }
}

/// Runs a netlink conversation in the calling thread's namespace.
pub(super) fn with_netlink<F, Fut>(talk: F) -> Found
where
    F: FnOnce(Handle) -> Fut,
    Fut: Future<Output = Found>,
{
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return Found::Unknown(format!("starting the probe's runtime: {e}")),
    };
    rt.block_on(async {
        let (conn, h, _) = match rtnetlink::new_connection() {
            Ok(c) => c,
            Err(e) => return Found::Unknown(format!("opening a netlink socket: {e}")),
        };
        tokio::spawn(conn);
        talk(h).await
    })
}

/// What a netlink refusal says about a feature: EOPNOTSUPP is the kernel's
/// answer for a device kind or an encapsulation it was built without.
pub(super) fn verdict(e: rtnetlink::Error) -> Found {
    if crate::netlink::errno(&e) == Some(libc::EOPNOTSUPP) {
        Found::Absent(format!(
            "the kernel answered: {}",
            crate::netlink::reason(e)
        ))
    } else {
        Found::Unknown(crate::netlink::reason(e))
    }
}

/// The index of lo in every namespace.
pub(super) const LO: u32 = 1;

/// Sets lo up (routes need their device up).
pub(super) async fn lo_up(h: &Handle) -> Result<(), Found> {
    h.link()
        .set(rtnetlink::LinkUnspec::new_with_index(LO).up().build())
        .execute()
        .await
        .map_err(|e| Found::Unknown(format!("setting lo up: {}", crate::netlink::reason(e))))
}

/// The index `veth_pair` gives the pair's first end.
pub(super) const VETH_INDEX: u32 = 10;
/// The pair's names: `PROBE_A` (index VETH_INDEX) and `PROBE_B`.
pub(super) const PROBE_A: &str = "probe0";
pub(super) const PROBE_B: &str = "probe1";

/// A veth pair, both ends up, for a probe that needs a device to sit on.
pub(super) async fn veth_pair(h: &Handle) -> Result<(), Found> {
    let m = rtnetlink::LinkVeth::new(PROBE_A, PROBE_B)
        .index(VETH_INDEX)
        .up()
        .build();
    h.link().add(m).execute().await.map_err(|e| {
        Found::Unknown(format!(
            "no veth pair to try it on: {}",
            crate::netlink::reason(e)
        ))
    })?;
    let peer = rtnetlink::LinkUnspec::new_with_name(PROBE_B).up().build();
    h.link().set(peer).execute().await.map_err(|e| {
        Found::Unknown(format!(
            "setting {PROBE_B} up: {}",
            crate::netlink::reason(e)
        ))
    })
}
