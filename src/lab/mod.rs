//! Labs as the command line sees them: a topology brought up under a name, found
//! again by name for check, status, exec and down.

pub mod datapath;
pub mod doctor;
pub mod impair;
pub mod liveness;
pub mod servers;
pub mod spawn;
pub mod status;

use crate::plan::{self, Naming};
use crate::topology::hosts::HostPart;
use crate::topology::{self, Topology};
use anyhow::{Context, Result, bail};
use netns::{Cancel, LabState, Phase};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The copy of the topology a lab was built from, kept in its state directory so
/// `check` and `status` read what was built, not a file edited since.
const TOPOLOGY_COPY: &str = "topology.toml";

/// What this machine's kernel can do that resolving a topology depends on
/// (topology::kernel), probed once per process.
pub fn this_kernel() -> topology::kernel::KernelFacts {
    topology::kernel::KernelFacts {
        seg6_lwtunnel: netns::features::seg6_lwtunnel(),
        xfrm_esp: netns::features::xfrm_esp(),
        // Refused only where the kernel said no: a probe that could not
        // tell (no root) leaves the refusal to `up`.
        wireguard: !netns::features::Feature::Wireguard.known_absent(),
        cake: netns::features::cake(),
    }
}

#[derive(Debug, Clone, Default)]
pub struct UpSummary {
    pub lab: String,
    pub namespaces: usize,
    pub links: usize,
    pub addresses: usize,
    pub routes: usize,
    pub elapsed: Duration,
}

/// Bring up `t` as lab `naming.lab`. Nothing remains of it on error or on `cancel`.
/// `force` takes host interfaces that carry the host's default route or its own
/// addresses (netns::host::preflight).
pub async fn up(
    t: &Topology,
    source: &Path,
    naming: &Naming,
    cancel: &Cancel,
    force: bool,
) -> Result<UpSummary> {
    let text =
        std::fs::read_to_string(source).with_context(|| format!("reading {}", source.display()))?;
    up_text(t, source, &text, naming, cancel, force).await
}

/// `up` for a topology whose text is not the file's own (a scenario's merged
/// file): the lab keeps `text` as the topology it was built from.
pub async fn up_text(
    t: &Topology,
    source: &Path,
    text: &str,
    naming: &Naming,
    cancel: &Cancel,
    force: bool,
) -> Result<UpSummary> {
    up_part(t, source, text, naming, None, cancel, force).await
}

/// `up_text` of one host's `part` of a lab placed on several hosts (the
/// whole lab when None): its namespaces, links and VXLAN ends, and the
/// datapaths of its nodes. The record names the host.
pub async fn up_part(
    t: &Topology,
    source: &Path,
    text: &str,
    naming: &Naming,
    part: Option<&HostPart>,
    cancel: &Cancel,
    force: bool,
) -> Result<UpSummary> {
    let started = Instant::now();
    let p = plan::plan_part(t, naming, part);
    let count = |ph: Phase| p.ops.iter().filter(|o| o.phase() == ph).count();
    let delay = netns::test_env::var_os("TUNBENCH_TEST_PHASE_DELAY_MS")
        .and_then(|v| v.to_str()?.parse::<u64>().ok());
    let progress = move |_: Phase, _: usize| {
        // Test hook: widen the window in which a test can interrupt or kill `up`.
        if let Some(ms) = delay {
            std::thread::sleep(Duration::from_millis(ms));
        }
    };
    let abs = std::fs::canonicalize(source).ok();
    netns::up(&p, abs.clone(), cancel, &progress, force).await?;
    // Userspace datapaths (started below, once the lab's copy of the topology is
    // written) attach to the TUNs the plan made; a lab whose datapath cannot
    // start is taken down again, like any other failed step.
    let copy = LabState::dir(&naming.lab).join(TOPOLOGY_COPY);
    // The lab copy is parsed with the lab's name so `check` finds the same
    // namespaces; the datapath processes read it too, so it is written before
    // they start. It lives elsewhere, so profile paths are made absolute.
    let dir = abs
        .as_deref()
        .and_then(Path::parent)
        .or_else(|| source.parent())
        .unwrap_or(Path::new(""));
    let text = topology::absolute_profile_paths(text, dir);
    write_root_only(&copy, &text).with_context(|| format!("writing {}", copy.display()))?;
    let datapaths = crate::keys::LabKeys::make(t)
        .and_then(|k| k.store(&naming.lab))
        .context("making and storing the lab's tunnel keys")
        .and_then(|_| crate::lab::datapath::start_all(t, naming, part, None, cancel))
        .and_then(|_| match part {
            Some(part) => crate::lab::servers::start_part_servers(t, naming, part).map(|_| ()),
            None => Ok(()),
        });
    if let Err(e) = datapaths {
        let _ = netns::down(&naming.lab).await;
        return Err(e.context(format!("bringing up lab {}", naming.lab)));
    }
    Ok(UpSummary {
        lab: naming.lab.clone(),
        namespaces: count(Phase::Namespaces),
        links: count(Phase::Links),
        addresses: count(Phase::Addresses),
        routes: count(Phase::Routes),
        elapsed: started.elapsed(),
    })
}

/// Write the lab's copy of its topology readable by root only: a topology may
/// give a `private_key`, `preshared_key` or `psk` in the clear. Every reader of
/// the copy (`check`, `status`, the datapath processes `up` starts) runs as
/// root, so none loses anything. Made with that mode, never chmod-ed after, so
/// no other user can open it in between.
fn write_root_only(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    // A file left from before (mode given only on create) is narrowed too.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(text.as_bytes())
}

/// A running lab: its record, the topology it was built from, and its naming.
pub struct Running {
    pub state: LabState,
    pub topology: Topology,
    pub naming: Naming,
}

pub fn find(lab: &str) -> Result<Running> {
    let Some(state) = LabState::load(lab)? else {
        let labs = LabState::lab_names();
        bail!(
            "no lab named {lab} is up{}",
            if labs.is_empty() {
                String::new()
            } else {
                format!(" (labs: {})", labs.join(", "))
            }
        );
    };
    let copy = LabState::dir(lab).join(TOPOLOGY_COPY);
    let topology = topology::load(&copy, this_kernel())
        .with_context(|| format!("reading the topology lab {lab} was built from"))?;
    // Recover the prefix from any node's namespace name.
    let prefix = state
        .nodes
        .first()
        .and_then(|n| n.namespace.strip_suffix(&n.node))
        .map(String::from)
        .unwrap_or_else(|| format!("{lab}-"));
    let naming = Naming {
        lab: lab.to_string(),
        prefix,
    };
    Ok(Running {
        state,
        topology,
        naming,
    })
}

/// `down` takes a lab name or a topology file (whose `name` is the lab's).
pub fn lab_name_of(arg: &str) -> Result<String> {
    let p = PathBuf::from(arg);
    if arg.ends_with(".toml") || (p.is_file() && !topology::valid_name(arg)) {
        let t = topology::load(&p, this_kernel())?;
        return Ok(t.name);
    }
    if !topology::valid_name(arg) {
        bail!("\"{arg}\" is neither a lab name nor a topology file");
    }
    Ok(arg.to_string())
}
