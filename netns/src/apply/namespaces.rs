//! The namespaces phase: each namespace made, marked and given its sysctls on
//! a worker thread, which hands back the netlink socket it opened inside.

use super::{ApplyError, Cancel, Namespaces, Ns, Steps};
use crate::ops::{Op, Phase};
use crate::{namespace, sysctl};
use netlink_packet_route::link::LinkAttribute;
use std::io;
use std::os::fd::{FromRawFd, IntoRawFd, RawFd};

/// Why a worker thread stopped.
enum NsFail {
    Cancelled,
    Thread,
    Step(usize, String),
    Taken(String),
}

impl NsFail {
    fn into_error(self, steps: &Steps) -> ApplyError {
        match self {
            NsFail::Cancelled => ApplyError::Cancelled,
            NsFail::Thread => steps.setup_fail("namespace worker", "thread panicked".into()),
            NsFail::Step(step, reason) => steps.fail(step, reason),
            NsFail::Taken(ns) => ApplyError::Taken(ns),
        }
    }
}

/// Every namespace of the plan, with a netlink handle and a descriptor of each.
pub(super) async fn make_all(steps: &Steps<'_>, cancel: &Cancel) -> Result<Namespaces, ApplyError> {
    let sockets = make_on_workers(steps, cancel).await?;
    let mut nss = Namespaces::new();
    for (name, fd) in sockets {
        // SAFETY: fd is a netlink socket handed over by the worker thread.
        let sock = unsafe { netlink_sys::TokioSocket::from_raw_fd(fd) };
        let (conn, handle, _) = rtnetlink::from_socket(sock);
        tokio::spawn(conn);
        let file = namespace::open(&name)
            .map_err(|e| steps.setup_fail(&format!("open namespace {name}"), e.to_string()))?;
        nss.insert(name, Ns { handle, file });
    }
    Ok(nss)
}

/// Split over two worker threads (the machine's cores); each namespace's name
/// and the netlink socket opened inside it.
async fn make_on_workers(
    steps: &Steps<'_>,
    cancel: &Cancel,
) -> Result<Vec<(String, RawFd)>, ApplyError> {
    let ns_ops: Vec<(usize, Op)> = steps
        .phase(Phase::Namespaces)
        .map(|(i, o)| (i, o.clone()))
        .collect();
    let workers = 2.min(ns_ops.len()).max(1);
    let mut chunks: Vec<Vec<(usize, Op)>> = vec![Vec::new(); workers];
    for (k, op) in ns_ops.into_iter().enumerate() {
        chunks[k % workers].push(op);
    }
    let mut threads = Vec::new();
    for chunk in chunks {
        let cancel = cancel.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = tx.send(make_namespaces(chunk, &cancel));
        });
        threads.push(rx);
    }
    let mut sockets: Vec<(String, RawFd)> = Vec::new();
    let mut first_err = None;
    for rx in threads {
        match rx.await {
            Ok(Ok(v)) => sockets.extend(v),
            Ok(Err(e)) => first_err = first_err.or(Some(e)),
            Err(_) => first_err = first_err.or(Some(NsFail::Thread)),
        }
    }
    match first_err {
        None => Ok(sockets),
        Some(e) => {
            close(sockets);
            Err(e.into_error(steps))
        }
    }
}

fn close(sockets: Vec<(String, RawFd)>) {
    for (_, fd) in sockets {
        // SAFETY: the fd came from into_raw_fd and is owned by nobody else.
        drop(unsafe { netlink_sys::Socket::from_raw_fd(fd) });
    }
}

/// On a worker thread of its own: each namespace is made by unsharing into it,
/// so the thread ends up inside the last one and is never reused.
fn make_namespaces(ops: Vec<(usize, Op)>, cancel: &Cancel) -> Result<Vec<(String, RawFd)>, NsFail> {
    let mut out = Vec::new();
    for (step, op) in ops {
        if cancel.is_cancelled() {
            close(out);
            return Err(NsFail::Cancelled);
        }
        let Op::Namespace {
            ns,
            sysctls,
            marker,
        } = op
        else {
            continue;
        };
        match make_namespace(step, &ns, &marker, &sysctls) {
            Ok(sock) => out.push((ns, sock.into_raw_fd())),
            Err(e) => {
                close(out);
                return Err(e);
            }
        }
    }
    Ok(out)
}

/// Make namespace `ns` here, mark its lo, write its sysctls; a netlink socket
/// opened inside it.
fn make_namespace(
    step: usize,
    ns: &str,
    marker: &str,
    sysctls: &[(String, String)],
) -> Result<netlink_sys::Socket, NsFail> {
    // Marked before it is bound under its name: `down` removes only
    // namespaces that carry the lab's marker, so one visible but unmarked
    // when `up` dies would be left behind.
    let sock = namespace::create_here_with(ns, || {
        let sock = netlink_sys::Socket::new(netlink_sys::protocols::NETLINK_ROUTE)?;
        mark_lo(&sock, marker).map_err(|e| io::Error::other(format!("marking lo in {ns}: {e}")))?;
        Ok(sock)
    })
    .map_err(|e| {
        if e.kind() == io::ErrorKind::AlreadyExists {
            NsFail::Taken(ns.to_string())
        } else {
            NsFail::Step(step, e.to_string())
        }
    })?;
    for (k, v) in sysctls {
        sysctl::write(k, v).map_err(|e| NsFail::Step(step, format!("sysctl {k}={v}: {e}")))?;
    }
    Ok(sock)
}

/// Add the lab's marker to lo (index 1) as an altname, over a netlink socket of
/// the namespace, waiting for the kernel's answer.
fn mark_lo(sock: &netlink_sys::Socket, marker: &str) -> io::Result<()> {
    use netlink_packet_core::{
        NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST, NetlinkMessage,
        NetlinkPayload,
    };
    use netlink_packet_route::RouteNetlinkMessage;
    use netlink_packet_route::link::{LinkMessage, Prop};
    let mut m = LinkMessage::default();
    m.header.index = 1;
    m.attributes
        .push(LinkAttribute::PropList(vec![Prop::AltIfName(
            marker.to_string(),
        )]));
    let mut req = NetlinkMessage::from(RouteNetlinkMessage::NewLinkProp(m));
    req.header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_EXCL | NLM_F_CREATE | NLM_F_APPEND;
    req.header.sequence_number = 1;
    req.finalize();
    let mut out = vec![0; req.buffer_len()];
    req.serialize(&mut out);
    sock.send(&out, 0)?;
    let mut buf = vec![0u8; 8192];
    let n = sock.recv(&mut &mut buf[..], 0)?;
    let answer = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[..n])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    match answer.payload {
        NetlinkPayload::Error(e) if e.code.is_some() => Err(e.to_io()),
        _ => Ok(()),
    }
}
