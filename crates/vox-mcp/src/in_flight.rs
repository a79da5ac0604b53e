//! A session's requests in flight, bounded: past [`MAX_IN_FLIGHT`] requests read and not yet
//! answered (or cancelled), the transport reads no more until one is. Without it a client that
//! sends and never reads has every request it sent run at once, each answer held in memory.

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use std::collections::HashSet;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Requests of one session running at once.
pub const MAX_IN_FLIGHT: usize = 64;

/// The request an outgoing message answers, if it answers one.
pub fn answered_id(item: &TxJsonRpcMessage<RoleServer>) -> Option<&RequestId> {
    match item {
        JsonRpcMessage::Response(r) => Some(&r.id),
        JsonRpcMessage::Error(e) => e.id.as_ref(),
        _ => None,
    }
}

/// The request an incoming `notifications/cancelled` cancels (MCP: it is never answered).
pub fn cancelled_id(message: &RxJsonRpcMessage<RoleServer>) -> Option<&RequestId> {
    match message {
        JsonRpcMessage::Notification(n) => match &n.notification {
            ClientNotification::CancelledNotification(c) => c.params.request_id.as_ref(),
            _ => None,
        },
        _ => None,
    }
}

/// `inner` with at most [`MAX_IN_FLIGHT`] requests read and unanswered.
pub struct InFlightLimit<T> {
    inner: T,
    open: Arc<Mutex<HashSet<RequestId>>>,
    freed: Arc<Notify>,
}

impl<T> InFlightLimit<T> {
    /// Bounds `inner`'s requests in flight.
    pub fn new(inner: T) -> Self {
        InFlightLimit {
            inner,
            open: Arc::default(),
            freed: Arc::default(),
        }
    }

    fn answered(&self, id: &RequestId) {
        let removed = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id);
        if removed {
            self.freed.notify_one();
        }
    }

    fn full(&self) -> bool {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
            >= MAX_IN_FLIGHT
    }
}

impl<T> Transport<RoleServer> for InFlightLimit<T>
where
    T: Transport<RoleServer, Error = io::Error>,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        if let Some(id) = answered_id(&item) {
            self.answered(id);
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        // A permit stored by `notify_one` while nobody waited is not lost: the check repeats.
        while self.full() {
            self.freed.notified().await;
        }
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Request(r) = &message {
            self.open
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(r.id.clone());
        } else if let Some(id) = cancelled_id(&message) {
            self.answered(id);
        }
        Some(message)
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.inner.close().await
    }
}
