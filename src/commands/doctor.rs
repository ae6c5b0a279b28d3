//! `tunbench doctor`: what this machine and its kernel offer tunbench
//! (`lab::doctor`), as a table or JSON; exit 1 when something every lab needs
//! is missing.

use crate::lab::doctor;
use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// A JSON array, one object per feature and program: name, kind (kernel
    /// or program), required, available, version (programs, when known), what,
    /// detail, needed_by, without.
    #[arg(long)]
    pub json: bool,
}

pub fn doctor(a: DoctorArgs) -> Result<i32> {
    let checks = doctor::examine();
    if a.json {
        println!("{}", doctor::json(&checks));
    } else {
        print!(
            "{}",
            doctor::text(&checks, doctor::kernel_release().as_deref())
        );
    }
    Ok(doctor::exit_code(&checks))
}
