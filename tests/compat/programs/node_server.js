// A plain Node.js HTTP server: answers every request with 1 KiB and closes (Connection: close).
const http = require('http');
const body = 'n'.repeat(1024);
const port = Number(process.argv[2]);
http.createServer((req, res) => {
  res.writeHead(200, {'Content-Length': body.length, 'Connection': 'close'});
  res.end(body);
}).listen(port, '127.0.0.1', () => console.log('listening ' + port));
// Stopped by SIGTERM: exit normally (so that sanrun's SAN_REPORT line is written).
process.on('SIGTERM', () => process.exit(0));
