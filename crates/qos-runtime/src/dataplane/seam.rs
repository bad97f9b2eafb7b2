//! Where the data plane meets the local manager (thesis §4.3 → §4.2.2): the agent's IDT
//! table ([`crate::agent::AgentHandle::idt_table`]) is followed and every change is
//! applied to the running data plane. When the master is unreachable the table keeps
//! its last IDTs, so the data plane keeps enforcing them; on re-sync the new table is
//! applied whole.

use std::sync::Arc;

use qos_core::units::Duration;
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
