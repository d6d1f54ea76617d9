//! The classified message [`parse`](crate::parse) returns, and its kind.

use std::borrow::Cow;

use crate::{Id, RawJson};

/// A classified JSON-RPC 2.0 message, borrowing from its frame.
#[derive(Clone, Debug)]
pub enum Message<'a> {
    /// A call that expects an answer.
    Request {
        /// The id to answer to.
        id: Id<'a>,
        /// The method name.
        method: Cow<'a, str>,
        /// The parameters, as written (any JSON value, `null` included).
        params: Option<RawJson<'a>>,
    },
    /// A call without an id: no answer expected.
    Notification {
        /// The method name.
        method: Cow<'a, str>,
        /// The parameters, as written.
        params: Option<RawJson<'a>>,
    },
    /// A successful answer.
    Response {
        /// The id of the request answered.
        id: Id<'a>,
        /// The result, as written (may be `null`).
        result: RawJson<'a>,
    },
    /// A failed answer.
    ErrorResponse {
        /// The id of the request answered; `None` when the frame said `null`
        /// (the peer could not read the request's id).
        id: Option<Id<'a>>,
        /// The error object, as written.
        error: RawJson<'a>,
    },
}

/// The four kinds of JSON-RPC message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// [`Message::Request`].
    Request,
    /// [`Message::Notification`].
    Notification,
    /// [`Message::Response`].
    Response,
    /// [`Message::ErrorResponse`].
    ErrorResponse,
}

impl<'a> Message<'a> {
    /// The kind of message.
    pub fn kind(&self) -> Kind {
        match self {
            Message::Request { .. } => Kind::Request,
            Message::Notification { .. } => Kind::Notification,
            Message::Response { .. } => Kind::Response,
            Message::ErrorResponse { .. } => Kind::ErrorResponse,
        }
    }

    /// The id: always for requests and responses, never for notifications,
    /// and for error responses unless it was `null`.
    pub fn id(&self) -> Option<&Id<'a>> {
        match self {
            Message::Request { id, .. } | Message::Response { id, .. } => Some(id),
            Message::ErrorResponse { id, .. } => id.as_ref(),
            Message::Notification { .. } => None,
        }
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            Message::Response { .. } | Message::ErrorResponse { .. } => None,
        }
    }

    /// The payload as written: `params` of a request or notification (if
    /// present), `result` of a response, `error` of an error response.
    pub fn payload(&self) -> Option<RawJson<'a>> {
        match self {
            Message::Request { params, .. } | Message::Notification { params, .. } => *params,
            Message::Response { result, .. } => Some(*result),
            Message::ErrorResponse { error, .. } => Some(*error),
        }
    }
}
