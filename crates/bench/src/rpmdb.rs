//! The rpmdb line: what RHEL 8's rpmdb format costs.
//!
//! What it must not do: change the build it reads (the rpmdb is checked
//! out of the commit into the scratch directory and converted there).

use std::process::Command;

use anyhow::{ensure, Result};

use crate::bench::Bench;
use crate::measure::{timed, Composed, Run};
use crate::table::{Goal, Line};

impl Bench<'_> {
    /// What RHEL 8's rpmdb format costs: the composed commit's Berkeley DB
    /// database written again by strata (export with the host's rpm, write
    /// with libdb), against the host's rpm importing the same headers into
    /// sqlite (`rpmdb --importdb`), the format it writes natively.
    pub fn rpmdb(&mut self, v1: &Composed) -> Result<()> {
        let db = self.dir.join("rpmdb-bench");
        strata_process::run(
            Command::new("ostree")
                .arg(format!("--repo={}", self.workdir.join("repo").display()))
                .args([
                    "checkout",
                    "-U",
                    "--subpath=/usr/share/rpm",
                    &v1.ostree_commit,
                ])
                .arg(&db),
        )?;
        ensure!(
            strata_rpmdb::Backend::detect(&db) == Some(strata_rpmdb::Backend::Bdb),
            "the composed RHEL 8 commit has no Berkeley DB rpmdb"
        );
        let (to_sqlite, ()) =
            timed(|| Ok(strata_rpmdb::convert(&db, strata_rpmdb::Backend::Sqlite)?))?;
        let (to_bdb, ()) = timed(|| Ok(strata_rpmdb::convert(&db, strata_rpmdb::Backend::Bdb)?))?;
        let mut line = Line::share(
            "rpmdb: Berkeley DB write vs rpm's sqlite import (in-process)",
            &Run {
                wall: to_bdb,
                rss: 0,
            },
            &Run {
                wall: to_sqlite,
                rss: 0,
            },
            Goal::None,
        );
        line.ratio_of = "bdb/sqlite";
        self.lines.push(line);
        crate::scratch::set_aside(&db)?;
        Ok(())
    }
}
