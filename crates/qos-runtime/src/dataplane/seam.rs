//! Where the data plane meets the local manager (thesis §4.3 → §4.2.2): the agent's IDT
//! table ([`crate::agent::AgentHandle::idt_table`]) is followed and every change is
//! applied to the running data plane. When the master is unreachable the table keeps
//! its last IDTs, so the data plane keeps enforcing them; on re-sync the new table is
//! applied whole.

use std::sync::Arc;

use qos_core::units::Duration;
use tokio::sync::watch;

use crate::agent::IdtTable;
use crate::shm::server::{DataPlaneHandle, IdtRow};

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
