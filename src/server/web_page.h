// The page GET / serves: a chat and the attention lab (src/server/web/index.html, embedded at build
// time so the binary needs no files and the page no network).
#pragma once

namespace flashport::server {

const char* web_page();

}  // namespace flashport::server
