//! Tests that run on Debian's stock kernel, booted in a VM by
//! scripts/stock-kernel.sh (scripts/test.sh runs them there, in one boot):
//! the kernel paths tunbench has (the kernel DS-Lite softwire, strongSwan's
//! kernel ESP, VLAN and ipvlan host links, `doctor`'s verdicts, CAKE as a
//! link's shaper) on the kernel its users run, and the kernel's netem as the
//! reference for the link relay. Each test first checks that it is on such a
//! kernel and fails, saying how to run it, where it is not.

#[path = "../common/mod.rs"]
mod common;

mod dslite;
mod ikev2_kernel;
mod impair_refs;
mod kernel;
mod kernel_tunnels;
mod main_job;

// Tests of other binaries whose kernel paths a development kernel may only
// refuse; the stock-kernel profile (.config/nextest.toml) picks which run.
#[allow(dead_code)]
#[path = "../lab/doctor.rs"]
mod doctor;
#[allow(dead_code)]
#[path = "../lab/host_links.rs"]
mod host_links;
#[allow(dead_code)]
#[path = "../datapath/impair.rs"]
mod impair;
#[allow(dead_code)]
#[path = "../datapath/support.rs"]
mod support;
// The capture that checks each tunnel's overhead, for the kernel's tunnels.
#[path = "../datapath/overhead.rs"]
mod overhead;

// The DS-Lite tests of the tunnels binary; the stock-kernel profile runs
// those of the kernel datapath, which a kernel without seg6 only refuses.
#[allow(dead_code)]
#[path = "../tunnels/dslite.rs"]
mod dslite_tunnels;
