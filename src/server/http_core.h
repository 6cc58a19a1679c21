// cpp-httplib's Server with hymoe's own connection loop (internal to the server).
//
// cpp-httplib 0.11 reads each request of a keep-alive connection through a fresh SocketStream:
// the bytes it read ahead (a pipelined next request) die with it and the client waits for an
// answer that never comes. An exception out of its error handler or a content provider ends the
// process. HttpCore replaces the per-connection loop (process_and_close_socket, a virtual of
// httplib::Server) and keeps httplib's request parsing, routing and response writing:
// - one buffered stream per connection, so pipelined requests are answered in order;
// - a byte budget per request (line, headers and body as sent), so headers or a chunked body
//   cannot grow without bound;
// - a chunked body checked byte by byte as httplib reads it (ChunkedFraming): httplib's own
//   decoder takes malformed sizes and chunks longer than their size, or waits for the read
//   timeout on a negative size; the check fails the read at the first bad byte, so the answer is
//   400 at once;
// - answers are sent to a client that has half-closed its end (one that sent a body shorter
//   than its Content-Length and shut down writing gets its 400);
// - a handler can ask for the connection to close after its answer (framing the server cannot
//   resynchronise on), with `Connection: close` on that answer;
// - any exception becomes a 500 with `Connection: close` when nothing of the answer was written
//   yet, else the connection closes; the server keeps serving either way;
// - sends never raise SIGPIPE; a connection with unread bytes is closed after a short linger
//   so that the client reads the answer instead of a reset.
// Written against cpp-httplib 0.11 (Debian 12): it relies on process_and_close_socket being
// virtual and on the protected process_request(Stream&, bool, bool&, setup) of that version.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <cstdint>

namespace hymoe::server {

class HttpCore final : public httplib::Server {
 public:
  // Bytes one request may send (request line, headers, body with its chunk framing). A read
  // past it fails the request; request_over_budget() then tells the error handler why.
  void set_request_byte_budget(size_t bytes) { request_byte_budget_ = bytes; }

  // On the thread answering a request (handlers, pre/post routing, error and exception
  // handlers): close the connection after this answer, and say so in its headers.
  static void close_after(httplib::Response& res);
  // Whether the current request went past its byte budget (false outside a request).
  static bool request_over_budget();
  // Why reading the current request's body failed (invalid chunked framing, the connection
  // ended or timed out mid-body), or nullptr; static text.
  static const char* body_problem();
  // Removes httplib's Keep-Alive header from an answer that closes the connection (httplib adds
  // it before the post-routing handler runs); call from the post-routing handler.
  static void tidy_connection_headers(httplib::Response& res);

 private:
  bool process_and_close_socket(socket_t sock) override;

  size_t request_byte_budget_ = SIZE_MAX;
};

}  // namespace hymoe::server
