//! Tests that run on Debian's stock kernel, booted in a VM by
//! scripts/stock-kernel.sh (scripts/test.sh runs them there, in one boot):
//! the kernel paths tunbench has (the kernel DS-Lite softwire, VLAN and ipvlan
//! host links, `doctor`'s verdicts) on the kernel its users run. Each test
//! first checks that it is on such a kernel and fails, saying how to run it,
//! where it is not.

#[path = "../common/mod.rs"]
mod common;

mod dslite;
mod kernel;

// The DS-Lite tests of the tunnels binary; the stock-kernel profile runs
// those of the kernel datapath, which a kernel without seg6 only refuses.
#[path = "../tunnels/dslite.rs"]
mod dslite_tunnels;
