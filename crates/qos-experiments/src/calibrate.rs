//! Calibrating a real node (thesis §5.3) for `clusterqos calibrate`: one flow of 64 KB
//! messages, IDT swept from 0 (unregulated: Bmax) up; T is the time per packet at Bmax,
//! below which the IDT does not slow the flow (the knee of Fig 5.3). The flow runs
//! between two data planes started for the purpose (on loopback, or in a testbed's first
//! two hosts); the measured T and Bmax are written into a manager's topology file
//! without losing its formatting or comments.

use std::path::{Path, PathBuf};

use crate::report::Table;
use qos_core::sched::SchedulerKind;
use qos_core::units::Bytes;
use qos_runtime::dataplane::harness::{calibrate, Calibration, Harness, HarnessError, NodeSite};

/// What `clusterqos calibrate` was asked.
#[derive(Debug, Clone)]
pub struct Options {
    /// Run between the testbed's hosts h0 and h1 (its directory); else on loopback.
    pub testbed: Option<PathBuf>,
    /// Message size ("64KiB").
    pub message_size: String,
    /// Messages per sweep point.
    pub messages: usize,
    /// Payload bytes per packet (default: from the path MTU).
    pub payload: Option<usize>,
    /// Topology file to write T and Bmax into.
    pub topology: Option<PathBuf>,
    /// Write into this `[[host]]` entry instead of `[defaults]`.
    pub node: Option<String>,
}

/// Why a calibration failed.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// An option or a file's content is wrong (the message names it).
    #[error("{0}")]
    Invalid(String),
    /// A file could not be read or written.
    #[error("{file}")]
    File {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// A socket for a data plane.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The testbed's state.
    #[error(transparent)]
    Testbed(#[from] qos_runtime::testbed::TestbedError),
    /// The data planes or the sweep.
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// The topology would no longer load (`file:line: message`).
    #[error(transparent)]
    Topology(#[from] qos_core::source::Located),
}

/// A finished calibration: the sweep, and T and Bmax as written into topology files.
#[derive(Debug, Clone)]
pub struct Calibrated {
    /// The IDT sweep and what it found.
    pub calibration: Calibration,
    /// T, as `"<ns>ns"`.
    pub t: String,
    /// Bmax, as the bandwidth prints.
    pub bmax: String,
}

/// Starts two data planes, sweeps the IDT of one flow between them (thesis §5.3) and,
/// given a topology file, writes T and Bmax into it.
pub fn run(o: &Options) -> Result<Calibrated, CalibrateError> {
    let size: Bytes = o
        .message_size
        .parse()
        .map_err(|e| CalibrateError::Invalid(format!("--message-size: {e}")))?;
    if size.get() == 0 || size.get() > 16 << 20 {
        return Err(CalibrateError::Invalid(
            "--message-size must be 1 B ..= 16 MiB".into(),
        ));
    }
    if o.messages == 0 {
        return Err(CalibrateError::Invalid(
            "--messages must be at least 1".into(),
        ));
    }
    let h = Harness::start(
        sites(o.testbed.as_deref())?,
        SchedulerKind::RateControl,
        o.payload,
    )?;
    let c = calibrate(&h, size.get() as usize, o.messages)?;
    drop(h);
    let t = format!("{}ns", c.t.as_ns());
    let bmax = format!("{}", c.bmax);
    if let Some(p) = &o.topology {
        write_parameters(p, o.node.as_deref(), &t, &bmax)?;
    }
    Ok(Calibrated {
        calibration: c,
        t,
        bmax,
    })
}

impl Calibrated {
    /// The sweep: achieved bandwidth at every IDT.
    pub fn sweep_table(&self) -> Table {
        let mut t = Table::new("sweep", "IDT sweep", ["IDT", "achieved"]);
        for (idt, b) in &self.calibration.sweep {
            t.push([idt.to_string(), b.to_string()]);
        }
        t
    }

    /// What was found: Bmax, T and the knee.
    pub fn summary(&self) -> String {
        let c = &self.calibration;
        format!(
            "Bmax = {} (IDT 0), T = {} per {}-byte packet; knee at IDT {}",
            c.bmax, c.t, c.packet_payload, c.knee
        )
    }
}

/// Two data-plane sites: fresh loopback addresses, or the testbed's hosts h0 and h1
/// (UDP port 7600) when `testbed` names a testbed directory.
pub fn sites(testbed: Option<&Path>) -> Result<Vec<NodeSite>, CalibrateError> {
    let Some(dir) = testbed else {
        let mut v = NodeSite::loopback(2)?;
        for (site, name) in v.iter_mut().zip(["a", "b"]) {
            site.name = name.into();
        }
        return Ok(v);
    };
    let st = qos_runtime::testbed::TestbedState::load(dir)?;
    if st.hosts.len() < 2 {
        return Err(CalibrateError::Invalid(format!(
            "the testbed has {} host(s); calibration needs two",
            st.hosts.len()
        )));
    }
    Ok(st.hosts[..2]
        .iter()
        .map(|h| NodeSite {
            name: h.name.clone(),
            addr: std::net::SocketAddr::new(h.addr.into(), 7600),
            netns: Some(h.netns.clone()),
            bound: None,
        })
        .collect())
}

/// Writes `t` and `bmax` into the topology file (`[defaults]`, or the `[[host]]` named
/// `node`), keeping its formatting and comments; the result must still load.
pub fn write_parameters(
    path: &Path,
    node: Option<&str>,
    t: &str,
    bmax: &str,
) -> Result<(), CalibrateError> {
    let name = path.display().to_string();
    let file = |source| CalibrateError::File {
        file: name.clone(),
        source,
    };
    let text = qos_core::source::decode_text(&name, std::fs::read(path).map_err(file)?)?;
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| CalibrateError::Invalid(format!("{name}: {e}")))?;
    match node {
        None => {
            if !doc.contains_key("defaults") {
                doc["defaults"] = toml_edit::table();
            }
            doc["defaults"]["t"] = toml_edit::value(t);
            doc["defaults"]["bmax"] = toml_edit::value(bmax);
        }
        Some(n) => {
            let hosts = doc
                .get_mut("host")
                .and_then(|h| h.as_array_of_tables_mut())
                .ok_or_else(|| CalibrateError::Invalid(format!("{name}: no [[host]] entries")))?;
            let h = hosts
                .iter_mut()
                .find(|h| h.get("name").and_then(|v| v.as_str()) == Some(n))
                .ok_or_else(|| {
                    CalibrateError::Invalid(format!("{name}: no [[host]] named '{n}'"))
                })?;
            h["t"] = toml_edit::value(t);
            h["bmax"] = toml_edit::value(bmax);
        }
    }
    let out = doc.to_string();
    // The result must still be a valid topology, before the file is touched.
    qos_core::topology::file::load(&name, &out)?;
    std::fs::write(path, out).map_err(file)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_replace_the_defaults_and_keep_comments() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.toml");
        std::fs::write(
            &p,
            "# our cluster\n[defaults]\nt = \"48us\"\nbmax = \"81.8MB/s\"\nlink = \"160MB/s\"\n\n[build]\nshape = \"crossbar\"\nhosts = 2\n",
        )
        .unwrap();
        write_parameters(&p, None, "50000ns", "80MB/s").unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("# our cluster"));
        assert!(text.contains("t = \"50000ns\"") && text.contains("bmax = \"80MB/s\""));
        let e = write_parameters(&p, Some("nobody"), "1us", "1MB/s").unwrap_err();
        assert!(e.to_string().contains("no [[host]]"), "{e}");
        // A value that would break the topology leaves the file as it was.
        assert!(write_parameters(&p, None, "fast", "80MB/s").is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
    }
}
