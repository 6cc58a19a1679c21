// Route handlers behind HttpServer (internal). Each parses, validates and answers one request;
// problems throw ApiException / hymoe::Error, which the server's exception handler turns into
// OpenAI-style error responses.
#pragma once

#include <string>

namespace httplib {
struct Response;
}

namespace hymoe::server {

struct ServedModel;
struct ServerConfig;
struct ApiError;
class Metrics;

void handle_chat(const ServedModel& model, const ServerConfig& config, Metrics& metrics, const std::string& body,
                 httplib::Response& res);
void handle_completion(const ServedModel& model, const ServerConfig& config, Metrics& metrics,
                       const std::string& body, httplib::Response& res);
void handle_tokenize(const ServedModel& model, const std::string& body, httplib::Response& res);
void handle_detokenize(const ServedModel& model, const std::string& body, httplib::Response& res);

void write_error(httplib::Response& res, const ApiError& e);

}  // namespace hymoe::server
