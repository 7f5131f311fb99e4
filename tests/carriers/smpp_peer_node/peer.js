'use strict';
// An SMSC for Relay's SMPP carrier tests: the npm `smpp` package (farhadi/node-smpp)
// in server mode, an implementation independent of the client's codec.
//
// Scripted by a JSON config (argv[2], changed later by {"cmd":"configure",...} lines
// on stdin); reports what it sees as one JSON object per line on stdout.

const readline = require('readline');
const smpp = require('smpp');

const config = Object.assign(
  {
    password: 'secret',
    submit: 'accept', // 'accept' | 'hold' (never answer) | 'status'
    status: 0, // command_status of every submit_sm_resp when submit is 'status'
    delay_ms: 0, // answer each submit_sm this long after it arrived
    receipt: null, // {stat, err, form: 'tlv' | 'text', before_resp: bool}
    drop_at_outstanding: 0, // destroy the connection once this many submits wait
    answer_enquire_link: true,
  },
  JSON.parse(process.argv[2] || '{}'),
);

const MESSAGE_STATES = {ENROUTE: 1, DELIVRD: 2, EXPIRED: 3, DELETED: 4, UNDELIV: 5, ACCEPTD: 6, UNKNOWN: 7, REJECTD: 8};
const sessions = new Map(); // number -> {session, waiting: [{pdu, messageId}]}
let sessionCount = 0;
let messageCount = 0;

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({event}, fields)) + '\n');
}

function text(message) {
  return message && typeof message === 'object' && 'message' in message ? String(message.message) : null;
}

function receiptText(stat, err, id) {
  const delivered = stat === 'DELIVRD' ? '001' : '000';
  const idField = id === null ? '' : `id:${id} `;
  return `${idField}sub:001 dlvrd:${delivered} submit date:2501011200 done date:2501011201 stat:${stat} err:${err} text:`;
}

function sendReceipt(number, entry) {
  const receipt = config.receipt;
  const withTlv = receipt.form === 'tlv';
  // The TLV form leaves `id:` out of the text, so only the TLV can name the message.
  const body = receiptText(receipt.stat, receipt.err || '000', withTlv ? null : entry.messageId);
  const options = {
    source_addr: entry.pdu.destination_addr,
    destination_addr: entry.pdu.source_addr,
    esm_class: 0x04,
    data_coding: 0,
    short_message: Buffer.from(body, 'latin1'),
  };
  if (withTlv) {
    options.receipted_message_id = entry.messageId;
    options.message_state = MESSAGE_STATES[receipt.stat];
  }
  emit('deliver_sm', {session: number, message_id: entry.messageId, stat: receipt.stat});
  sessions.get(number).session.deliver_sm(options, (resp) => {
    emit('deliver_sm_resp', {session: number, message_id: entry.messageId, status: resp.command_status});
  });
}

function answer(number, entry) {
  const state = sessions.get(number);
  const index = state ? state.waiting.indexOf(entry) : -1;
  if (index < 0) return;
  state.waiting.splice(index, 1);
  const status = config.submit === 'status' ? config.status : 0;
  const receipt = status === 0 && config.receipt;
  if (receipt && receipt.before_resp) sendReceipt(number, entry);
  // A non-zero status makes node-smpp send the header alone, as SMPP 3.4 allows.
  state.session.send(entry.pdu.response(status ? {command_status: status} : {message_id: entry.messageId}));
  emit('submit_sm_resp', {session: number, message_id: entry.messageId, status});
  if (receipt && !receipt.before_resp) sendReceipt(number, entry);
}

function onSubmit(number, pdu) {
  const state = sessions.get(number);
  const entry = {pdu, messageId: `msg-${++messageCount}`};
  state.waiting.push(entry);
  emit('submit', {
    session: number,
    message_id: entry.messageId,
    outstanding: state.waiting.length,
    data_coding: pdu.data_coding,
    text: text(pdu.short_message),
    payload_text: text(pdu.message_payload),
    source_addr: pdu.source_addr,
    source_addr_ton: pdu.source_addr_ton,
    source_addr_npi: pdu.source_addr_npi,
    destination_addr: pdu.destination_addr,
    dest_addr_ton: pdu.dest_addr_ton,
    registered_delivery: pdu.registered_delivery,
  });
  if (config.drop_at_outstanding && state.waiting.length >= config.drop_at_outstanding) {
    emit('drop', {session: number});
    state.session.destroy();
    return;
  }
  if (config.submit === 'hold') return;
  setTimeout(() => answer(number, entry), config.delay_ms);
}

const server = smpp.createServer((session) => {
  const number = ++sessionCount;
  sessions.set(number, {session, waiting: []});
  emit('connect', {session: number});
  session.on('bind_transceiver', (pdu) => {
    const ok = pdu.password === config.password;
    emit('bind', {session: number, system_id: pdu.system_id, system_type: pdu.system_type, ok});
    session.send(pdu.response(ok ? {system_id: 'NODE-SMSC'} : {command_status: smpp.ESME_RINVPASWD}));
  });
  session.on('submit_sm', (pdu) => onSubmit(number, pdu));
  session.on('enquire_link', (pdu) => {
    emit('enquire_link', {session: number});
    if (config.answer_enquire_link) session.send(pdu.response());
  });
  session.on('unbind', (pdu) => {
    emit('unbind', {session: number});
    session.send(pdu.response());
    session.close();
  });
  session.on('error', (error) => emit('session_error', {session: number, message: String(error)}));
  session.on('close', () => {
    sessions.delete(number);
    emit('close', {session: number});
  });
});

const commands = {
  configure: (fields) => Object.assign(config, fields),
};

readline.createInterface({input: process.stdin}).on('line', (line) => {
  const {cmd, ...fields} = JSON.parse(line);
  commands[cmd](fields);
  emit('done', {cmd});
});
process.stdin.on('end', () => process.exit(0));

server.listen(0, '127.0.0.1', () => emit('listening', {port: server.address().port}));
