//! Where the data plane meets the local manager (thesis §4.3 → §4.2.2): the agent's IDT
//! table ([`crate::agent::AgentHandle::idt_table`]) is followed and every change is
//! applied to the running data plane: each flow's IDT, and for a premium flow its
//! reserved bandwidth (VirtualClock's tick comes from it). When the master is unreachable the table keeps
//! its last IDTs, so the data plane keeps enforcing them; on re-sync the new table is
//! applied whole.

use std::sync::Arc;

use qos_core::units::{Bandwidth, Duration};
use tokio::sync::watch;

use crate::agent::IdtTable;
use crate::dataplane::service::{DataPlaneHandle, IdtRow};

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

/// Applies the table now and after every change, until the agent stops.
pub async fn follow(
    mut table: watch::Receiver<Arc<IdtTable>>,
    node: String,
    dataplane: DataPlaneHandle,
) {
    loop {
        let t = table.borrow_and_update().clone();
        dataplane.set_table(rows(&t, &node));
        if table.changed().await.is_err() {
            return;
        }
    }
}

/// Runs a node's agent (local manager) and its data plane together until interrupted:
/// the agent's IDT table is followed into the data plane. For `clusterqos agent` with a
/// data plane configured.
pub fn run_agent_with_dataplane(
    agent: crate::agent::Config,
    dataplane: crate::dataplane::service::DataPlaneConfig,
) -> Result<(), crate::agent::socket::SocketError> {
    use crate::agent::socket::SocketError;
    let node = agent.node.clone();
    let dp = crate::dataplane::service::DataPlane::bind(dataplane)
        .map_err(|e| SocketError::Other(format!("data plane: {e}")))?;
    let dp_handle = dp.handle();
    let agent = crate::agent::Config {
        ports: Some(dp.port_owners()),
        ..agent
    };
    let dp_thread = std::thread::Builder::new()
        .name("dataplane".into())
        .spawn(move || dp.run())
        .map_err(|e| SocketError::Other(e.to_string()))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| SocketError::Other(e.to_string()))?;
    let stop = dp_handle.clone();
    let result = rt.block_on(async move {
        let handle = crate::agent::start(agent).await?;
        tokio::spawn(follow(handle.idt_table(), node, dp_handle));
        println!("agent ready (with data plane)");
        crate::manager::wait_for_signal().await;
        handle.shutdown();
        Ok(())
    });
    stop.stop();
    let _ = dp_thread.join();
    result
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
