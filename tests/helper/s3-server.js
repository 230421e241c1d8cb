// s3-server.js MODULES DIR PORTFILE: an S3-compatible server (s3rver from
// npm, installed under MODULES) on 127.0.0.1, a free port, objects kept
// under DIR, bucket "data"; the port goes to PORTFILE (written whole, then
// renamed) once it listens. Credentials: S3RVER / S3RVER (signatures are
// checked). Runs until killed.
'use strict';
const path = require('path');
const fs = require('fs');
const [modules, dir, portFile] = process.argv.slice(2);
const S3rver = require(path.join(modules, 's3rver'));

const server = new S3rver({
	address: '127.0.0.1',
	port: Number(process.env.S3_PORT || 0),
	directory: dir,
	silent: true,
	configureBuckets: [{ name: 'data' }],
});
server.run().then((addr) => {
	fs.writeFileSync(portFile + '.tmp', String(addr.port) + '\n');
	fs.renameSync(portFile + '.tmp', portFile);
}, (e) => {
	console.error('s3-server: ' + e.message);
	process.exit(1);
});
