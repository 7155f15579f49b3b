// start.mjs: the npm @portkey-ai/gateway (package.json pins it), run as it
// ships but bound to 127.0.0.1 on a port the kernel picks. Its own
// --port=N binds every interface and cannot say what port 0 became, so
// http.Server's listen is wrapped here. Once bound it prints exactly
// "listening 127.0.0.1:PORT" on stdout, as `stepq mock` does: one line
// gives readiness and port (tests/test_gateway.c reads it). What the
// gateway writes to stdout after that (a spinner, a banner) is dropped, so
// a reader that stops at the line never blocks it; its errors still go to
// stderr.
//
// Usage: node tests/gateway/start.mjs   (after npm ci in tests/gateway)
import http from "node:http";

const listen = http.Server.prototype.listen;
http.Server.prototype.listen = function (...args) {
    this.once("listening", () => {
        const port = this.address().port;
        process.stdout.write(`listening 127.0.0.1:${port}\n`);
        process.stdout.write = () => true;
    });
    const cb = args.find((a) => typeof a === "function");
    return cb ? listen.call(this, 0, "127.0.0.1", cb)
              : listen.call(this, 0, "127.0.0.1");
};
process.argv.push("--headless");
await import("@portkey-ai/gateway/build/start-server.js");
