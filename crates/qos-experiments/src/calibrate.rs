//! Calibrating a real node (thesis §5.3) for `clusterqos calibrate`: the two data planes
//! the IDT sweep runs between (on loopback, or in a testbed's first two hosts), and
//! writing the measured T and Bmax into a manager's topology file without losing its
//! formatting or comments.

use std::path::Path;

use anyhow::Context;
use qos_runtime::dataplane::harness::NodeSite;

/// Two data-plane sites: fresh loopback addresses, or the testbed's hosts h0 and h1
/// (UDP port 7600) when `testbed` names a testbed directory.
pub fn sites(testbed: Option<&Path>) -> anyhow::Result<Vec<NodeSite>> {
    let Some(dir) = testbed else {
        let mut v = Vec::new();
        for name in ["a", "b"] {
            v.push(NodeSite {
                name: name.into(),
                addr: std::net::UdpSocket::bind("127.0.0.1:0")?.local_addr()?,
                netns: None,
            });
        }
        return Ok(v);
    };
    let st = qos_runtime::testbed::TestbedState::load(dir)?;
    if st.hosts.len() < 2 {
        anyhow::bail!(
            "the testbed has {} host(s); calibration needs two",
            st.hosts.len()
        );
    }
    Ok(st.hosts[..2]
        .iter()
        .map(|h| NodeSite {
            name: h.name.clone(),
            addr: std::net::SocketAddr::new(h.addr.into(), 7600),
            netns: Some(h.netns.clone()),
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
) -> anyhow::Result<()> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| name.clone())?;
    let mut doc: toml_edit::DocumentMut =
        text.parse().map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
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
                .ok_or_else(|| anyhow::anyhow!("{name}: no [[host]] entries"))?;
            let h = hosts
                .iter_mut()
                .find(|h| h.get("name").and_then(|v| v.as_str()) == Some(n))
                .ok_or_else(|| anyhow::anyhow!("{name}: no [[host]] named '{n}'"))?;
            h["t"] = toml_edit::value(t);
            h["bmax"] = toml_edit::value(bmax);
        }
    }
    let out = doc.to_string();
    // The result must still be a valid topology, before the file is touched.
    qos_core::topology::file::load(&name, &out).map_err(|e| anyhow::anyhow!("{e}"))?;
    std::fs::write(path, out).with_context(|| name.clone())?;
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
