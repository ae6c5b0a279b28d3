//! Carries out a plan over netlink. Namespaces are made on worker threads (each
//! thread unshares into the new namespace and opens the netlink socket there);
//! everything after that is netlink requests, pipelined: all the ops of a phase
//! are in flight at once across every namespace.

mod carrier;
mod links;
mod messages;
mod namespaces;
mod requests;
pub(crate) mod vxlan;

pub(crate) use messages::{seg6_encap_message, seg6local_message};
pub(crate) use vxlan::preflight as vxlan_preflight;

use crate::ops::{Op, Phase, Plan};
use crate::{namespace, sysctl};
use rtnetlink::Handle;
use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set from a signal handler; checked between phases and between namespaces.
#[derive(Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst)
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("step {step} of {total}, `{what}`: {reason}")]
    Step {
        step: usize,
        total: usize,
        what: String,
        reason: String,
    },
    #[error("interrupted")]
    Cancelled,
    #[error("namespace {0} was made by someone else while the lab was being built")]
    Taken(String),
}

/// The marker on every lab namespace's lo: ownership is in the kernel object
/// itself, so `clean` can find a lab's namespaces even without its state file.
pub fn marker(lab: &str) -> String {
    format!("tunbench.{lab}")
}

/// Called after each phase with the phase and how many ops it ran.
pub type Progress<'a> = &'a (dyn Fn(Phase, usize) + Sync);

/// A lab namespace as `apply` works in it.
struct Ns {
    handle: Handle,
    /// Kept open to give veth peers a target (IFLA_NET_NS_FD).
    file: File,
}

/// Every namespace of the plan, by name.
type Namespaces = HashMap<String, Ns>;

pub async fn apply(plan: &Plan, cancel: &Cancel, progress: Progress<'_>) -> Result<(), ApplyError> {
    let steps = Steps { plan };
    let nss = namespaces::make_all(&steps, cancel).await?;
    progress(Phase::Namespaces, nss.len());
    check(cancel)?;
    let host = links::read_host(&steps).await?;
    let made = links::make_all(&steps, &nss, host.as_ref()).await?;
    progress(Phase::Links, made);
    check(cancel)?;
    let devices = requests::Devices::read(&steps, &nss).await?;
    let written = write_device_sysctls(&steps)?;
    progress(Phase::Sysctls, written);
    check(cancel)?;
    for phase in [Phase::Ports, Phase::Addresses, Phase::Routes] {
        let sent = requests::send_phase(&steps, phase, &nss, &devices).await?;
        progress(phase, sent);
        check(cancel)?;
    }
    let loaded = run_tools(&steps)?;
    if loaded > 0 {
        progress(Phase::Firewall, loaded);
    }
    carrier::wait_for_carrier(plan, &nss).await;
    Ok(())
}

/// The plan's ops numbered from 1, as its errors name them.
#[derive(Clone, Copy)]
struct Steps<'a> {
    plan: &'a Plan,
}

impl<'a> Steps<'a> {
    /// The ops of phase `p`, with their step numbers.
    fn phase(&self, p: Phase) -> impl Iterator<Item = (usize, &'a Op)> {
        let ops = &self.plan.ops;
        (1..).zip(ops).filter(move |(_, o)| o.phase() == p)
    }

    /// Step `step` (from 1) failed.
    fn fail(&self, step: usize, reason: String) -> ApplyError {
        ApplyError::Step {
            step,
            total: self.plan.ops.len(),
            what: self.plan.ops[step - 1].to_string(),
            reason,
        }
    }

    /// Work of no single step failed ("step 0").
    fn setup_fail(&self, what: &str, reason: String) -> ApplyError {
        ApplyError::Step {
            step: 0,
            total: self.plan.ops.len(),
            what: what.into(),
            reason,
        }
    }
}

fn check(c: &Cancel) -> Result<(), ApplyError> {
    if c.is_cancelled() {
        Err(ApplyError::Cancelled)
    } else {
        Ok(())
    }
}

/// Sysctls that name a device: on a thread inside each namespace. How many.
fn write_device_sysctls(steps: &Steps) -> Result<usize, ApplyError> {
    let sysctls: Vec<(usize, &Op)> = steps.phase(Phase::Sysctls).collect();
    for (step, op) in &sysctls {
        if let Op::Sysctl { ns, key, value } = op {
            let (k, v) = (key.clone(), value.clone());
            namespace::run_in(ns, move || sysctl::write(&k, &v))
                .map_err(|e| steps.fail(*step, e.to_string()))?;
        }
    }
    Ok(sysctls.len())
}

/// nftables rulesets, tc batches and packet steering: programs or sysfs
/// writes run inside the namespace, one after the other. How many.
fn run_tools(steps: &Steps) -> Result<usize, ApplyError> {
    let tools: Vec<(usize, &Op)> = steps.phase(Phase::Firewall).collect();
    for (step, op) in &tools {
        let fail = |e| steps.fail(*step, e);
        match op {
            Op::Nftables { ns, ruleset } => crate::nft::load(ns, ruleset).map_err(fail)?,
            Op::Tc { ns, batch } => crate::tc::run(ns, batch).map_err(fail)?,
            Op::SteerByFlow { ns, iface } => crate::steer::by_flow(ns, iface).map_err(fail)?,
            _ => {}
        }
    }
    Ok(tools.len())
}
