// Route handlers behind HttpServer (internal). Each parses, validates and answers one request;
// problems throw ApiException / hymoe::Error, which the server's exception handler turns into
// OpenAI-style error responses.
#pragma once

#include <string>

namespace httplib {
struct Request;
struct Response;
}

namespace hymoe::server {

struct ServedModel;
struct ServerConfig;
struct ApiError;
class Metrics;

// Non-streamed answers watch the request's connection (PeerWatch) and cancel the generation
// when the client goes away; streamed ones notice it as a failed write.
void handle_chat(const ServedModel& model, const ServerConfig& config, Metrics& metrics,
                 const httplib::Request& req, httplib::Response& res);
void handle_completion(const ServedModel& model, const ServerConfig& config, Metrics& metrics,
                       const httplib::Request& req, httplib::Response& res);
void handle_tokenize(const ServedModel& model, const std::string& body, httplib::Response& res);
void handle_detokenize(const ServedModel& model, const std::string& body, httplib::Response& res);

void write_error(httplib::Response& res, const ApiError& e);

}  // namespace hymoe::server
