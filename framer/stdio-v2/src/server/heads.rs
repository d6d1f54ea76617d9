//! The heads of the front's responses: a status alone, a JSON body's, an
//! event stream's. Shared by request streams and listen streams.

use http::{HeaderMap, HeaderValue, Response, StatusCode};

use crate::wire;

pub(super) fn status_only(status: StatusCode) -> Response<()> {
    let mut response = Response::new(());
    *response.status_mut() = status;
    response
}

pub(super) fn json_response(status: StatusCode) -> Response<()> {
    let mut response = status_only(status);
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(wire::JSON));
    response
}

pub(super) fn event_stream() -> Response<()> {
    let mut response = status_only(StatusCode::OK);
    let headers: &mut HeaderMap = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(wire::EVENT_STREAM));
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
