//! Where the data plane meets the local manager (thesis §4.3 → §4.2.2): the agent's IDT
//! table ([`crate::agent::AgentHandle::idt_table`]) is followed and every change is
//! applied to the running data plane: each flow's IDT, and for a premium flow its
//! reserved bandwidth (VirtualClock's tick comes from it). When the master is unreachable the table keeps
//! its last IDTs, so the data plane keeps enforcing them; on re-sync the new table is
//! applied whole. [`DataPlaneEnforcer`] is the data plane behind the agent's
//! `Enforcer` seam.

use std::sync::Arc;

use qos_core::units::{Bandwidth, Duration};
use tokio::sync::watch;

use crate::agent::enforcer::{EnforceError, Enforcer, Hooks};
use crate::agent::table::IdtTable;
use crate::dataplane::service::{DataPlane, DataPlaneConfig, DataPlaneHandle, IdtRow};
use crate::shutdown::Stop;

/// The rows of `table` whose flows start at `node`.
pub fn rows(table: &IdtTable, node: &str) -> Vec<IdtRow> {
    table
        .flows
        .values()
        .filter(|e| e.flow.src.node == node)
        .map(|e| IdtRow {
            src_port: e.flow.src.port,
            dst_node: e.flow.dst.node.clone(),
            dst_port: e.flow.dst.port,
            priority: e.flow.priority,
            idt: e.idt_ps.map(Duration::from_ps),
            reserved: (e.class == "premium").then(|| Bandwidth::from_bytes_per_sec(e.rate)),
        })
        .collect()
}

/// Applies the table now and after every change, until `stop` (or the agent is gone).
async fn follow(
    mut table: watch::Receiver<Arc<IdtTable>>,
    node: &str,
    dataplane: &DataPlaneHandle,
    mut stop: Stop,
) {
    loop {
        let t = table.borrow_and_update().clone();
        dataplane.set_table(rows(&t, node));
        tokio::select! {
            r = table.changed() => if r.is_err() { return },
            _ = stop.wait() => return,
        }
    }
}

/// The agent's data plane as its [`Enforcer`]: bound (its UDP socket and port socket)
/// when made, run on a thread of its own while the agent runs.
pub struct DataPlaneEnforcer {
    node: String,
    dataplane: Option<DataPlane>,
    handle: DataPlaneHandle,
}

impl DataPlaneEnforcer {
    /// Binds the data plane `cfg` describes.
    pub fn bind(cfg: DataPlaneConfig) -> std::io::Result<DataPlaneEnforcer> {
        let node = cfg.node.clone();
        let dataplane = DataPlane::bind(cfg)?;
        Ok(DataPlaneEnforcer {
            node,
            handle: dataplane.handle(),
            dataplane: Some(dataplane),
        })
    }
}

impl Enforcer for DataPlaneEnforcer {
    fn describe(&self) -> String {
        "with data plane".into()
    }

    fn hooks(&mut self) -> Hooks {
        Hooks {
            ports: self.dataplane.as_ref().map(DataPlane::port_owners),
            enforced: None,
            job_cgroups: None,
        }
    }

    fn run(
        &mut self,
        table: watch::Receiver<Arc<IdtTable>>,
        rt: tokio::runtime::Handle,
        stop: Stop,
    ) -> Result<(), EnforceError> {
        let dp = self.dataplane.take().ok_or("the data plane runs once")?;
        let engine = std::thread::Builder::new()
            .name("dataplane".into())
            .spawn(move || dp.run())?;
        rt.block_on(follow(table, &self.node, &self.handle, stop));
        self.handle.stop();
        match engine.join() {
            Ok(r) => r.map_err(|e| Box::new(e) as EnforceError),
            Err(_) => Err("the data plane thread panicked".into()),
        }
    }

    fn finish(self: Box<Self>) -> Result<(), EnforceError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{EndpointSpec, FlowSpec, IdtEntry, Owner};

    fn entry(src: &str, dst_port: u16, class: &str, rate: u64, idt: Option<u64>) -> IdtEntry {
        let flow = FlowSpec {
            src: EndpointSpec {
                node: src.into(),
                port: 1,
            },
            dst: EndpointSpec {
                node: "h1".into(),
                port: dst_port,
            },
            priority: 0,
        };
        IdtEntry {
            name: flow.to_string(),
            flow,
            class: class.into(),
            rate,
            idt_ps: idt,
            weight: u32::from(class != "premium"),
            owner: Owner { uid: 0, pid: 1 },
        }
    }

    /// A premium flow's row carries its reservation (VirtualClock's tick comes from
    /// it); a best-effort flow's share is an IDT only, never a reservation; rows of
    /// flows from other nodes are not this node's.
    #[test]
    fn rows_carry_the_reservation_of_premium_flows_only() {
        let table = IdtTable {
            flows: [
                entry("h0", 2, "premium", 2_000_000, Some(700_000)),
                entry("h0", 3, "best_effort", 5_000_000, Some(280_000)),
                entry("h2", 4, "premium", 1_000_000, Some(1_400_000)),
            ]
            .into_iter()
            .map(|e| (e.flow.clone(), e))
            .collect(),
            ..IdtTable::default()
        };
        let mut r = rows(&table, "h0");
        r.sort_by_key(|r| r.dst_port);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0].reserved,
            Some(Bandwidth::from_bytes_per_sec(2_000_000))
        );
        assert_eq!(r[0].idt, Some(Duration::from_ps(700_000)));
        assert_eq!(r[1].reserved, None);
        assert_eq!(r[1].idt, Some(Duration::from_ps(280_000)));
    }
}
