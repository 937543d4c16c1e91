// Whether the client of a non-streaming request is still there. Such a request writes nothing until its
// reply is whole, so a client that leaves is not noticed by a failed write as a stream's is; its job
// would run to max_tokens, holding KV blocks and a batch slot. cpp-httplib 0.11 gives a handler the
// connection's addresses but not its socket, so the socket is found by those addresses among this
// process's descriptors (the 4-tuple names one connection) and asked whether the peer has closed it.
#pragma once

#include <string>

namespace flashport::server {

// The descriptor of the TCP connection from remote_addr:remote_port to local_port (numeric addresses
// as cpp-httplib writes them), or -1 when none matches. Linux: reads /proc/self/fd. Only valid while
// the request's handler runs (cpp-httplib closes the socket after the reply).
int find_connection_socket(const std::string& remote_addr, int remote_port, int local_port);

// True once the peer has closed (or reset) the connection: POLLRDHUP, POLLHUP or POLLERR, without
// waiting. An HTTP/1.1 client that shuts down its sending side while it waits for a reply would read
// as gone; clients do not do that.
bool peer_closed(int fd);

}  // namespace flashport::server
