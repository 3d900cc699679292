-- A Wireshark dissector for the UDP link of nfacep: the payload format version 6 that
-- boards/UDP.md describes (its one definition in Python is links/udp/protocol.py).
--
-- Load it for one run:   wireshark -X lua_script:links/udp/nfacep.lua capture.pcap
--                        tshark -X lua_script:links/udp/nfacep.lua -r capture.pcap
-- or for good: copy it into Wireshark's personal Lua plugins folder (Help > About Wireshark >
-- Folders, "Personal Lua Plugins"; ~/.local/lib/wireshark/plugins/ on Linux).
--
-- It takes UDP port 5000 (the board's default; the preference "nfacep.port" changes it) and,
-- on any other port, payloads that start as this format's do (version 6, a known type, reserved
-- 0). Fields: nfacep.version, .type, .seq, .engine_id, .session; nfacep.tuples and
-- nfacep.records (how many a TUPLES or RECORDS packet holds, each one as nfacep.tuple or
-- nfacep.record); nfacep.params.from and .values (PARAMS); nfacep.load.offset, .last and
-- .bytes (LOAD: a chunk of a configuration image's load); nfacep.status.<field> for every
-- STATUS field (the engine parameters store, partitions, ways, timer_bits and tick_tuples,
-- the programmable engine's engine, states, atoms, queries, load_offset, refused, image and
-- image_from among them) and nfacep.status.values. The sizes of a tuple and a record are not
-- in TUPLES and RECORDS packets: the dissector learns them from the session's STATUS (the board answers
-- every RESET with one), or takes them from the preferences "tuple_bytes" / "record_bytes".
-- A payload that breaks the format (a command with a body, a partial tuple, a short STATUS,
-- an unknown type) gets an expert error of the group "Malformed".

local VERSION = 6
local HEADER_BYTES = 16
local SWITCH_BYTES = 6
local LOAD_HEADER_BYTES = 5

local TYPES = {
    [0x01] = "TUPLES",
    [0x02] = "STATUS_REQ",
    [0x03] = "RESET",
    [0x04] = "PARAMS",
    [0x05] = "CLOSE",
    [0x06] = "LOAD",
    [0x81] = "RECORDS",
    [0x82] = "STATUS",
}
local COMMANDS = { [0x02] = true, [0x03] = true, [0x05] = true }

-- The STATUS body, in order: (name, bytes), little-endian (protocol.py's STATUS_FIELDS, the
-- engine parameters after capacity: links/protocol.py's ENGINE_FIELDS).
local STATUS_FIELDS = {
    { "tuple_bytes", 2 }, { "record_bytes", 2 }, { "capacity", 4 },
    { "store", 1 }, { "partitions", 4 }, { "ways", 1 }, { "timer_bits", 1 }, { "tick_tuples", 4 },
    { "flags", 4 },
    { "tuples", 4 }, { "matched", 4 }, { "drops", 4 }, { "records", 4 }, { "packets", 4 },
    { "next_seq", 4 }, { "lost", 4 }, { "late", 4 }, { "echoes", 4 },
    { "accepted", 4 }, { "bad_size", 4 }, { "bad_fcs", 4 }, { "not_for_us", 4 },
    { "ip_unsupported", 4 }, { "bad_ip_checksum", 4 }, { "ip_fragment", 4 }, { "bad_udp", 4 },
    { "bad_header", 4 }, { "foreign", 4 }, { "engine_full", 4 }, { "bad_load", 4 },
    { "engine", 1 }, { "states", 2 }, { "atoms", 2 }, { "queries", 1 },
    { "load_offset", 4 }, { "refused", 4 }, { "image", 8 },
    { "image_from", 4 },
}

-- STATUS's store: the index of the store's name in nfacep/params.py's STORES.
local STORES = { [0] = "pipeline", [1] = "table", [2] = "sdram" }

local nfacep = Proto("nfacep", "nfacep UDP link")

local pf = {
    version = ProtoField.uint8("nfacep.version", "Version"),
    type = ProtoField.uint8("nfacep.type", "Type", base.HEX, TYPES),
    reserved = ProtoField.uint16("nfacep.reserved", "Reserved", base.HEX),
    seq = ProtoField.uint32("nfacep.seq", "Sequence number"),
    engine_id = ProtoField.uint32("nfacep.engine_id", "Engine id", base.HEX),
    session = ProtoField.uint32("nfacep.session", "Session", base.HEX),
    tuples = ProtoField.uint32("nfacep.tuples", "Tuples"),
    tuple = ProtoField.bytes("nfacep.tuple", "Tuple"),
    records = ProtoField.uint32("nfacep.records", "Records"),
    record = ProtoField.bytes("nfacep.record", "Record"),
    switch_from = ProtoField.uint64("nfacep.params.from", "From tuple"),
    switch_values = ProtoField.bytes("nfacep.params.values", "Values"),
    status_values = ProtoField.bytes("nfacep.status.values", "Values in force"),
    load_offset = ProtoField.uint32("nfacep.load.offset", "Offset in the load"),
    load_last = ProtoField.uint8("nfacep.load.last", "Last chunk", base.DEC, nil, 0x01),
    load_bytes = ProtoField.bytes("nfacep.load.bytes", "Bytes of the load"),
}
local status_fields = {}
local UINT = { [1] = ProtoField.uint8, [2] = ProtoField.uint16, [4] = ProtoField.uint32 }
for _, field in ipairs(STATUS_FIELDS) do
    local name, size = field[1], field[2]
    if size == 8 then
        status_fields[name] = ProtoField.uint64("nfacep.status." .. name, name, base.HEX)
    else
        status_fields[name] = UINT[size]("nfacep.status." .. name, name, base.DEC,
            name == "store" and STORES or nil)
    end
end
local all = {}
for _, f in pairs(pf) do all[#all + 1] = f end
for _, f in pairs(status_fields) do all[#all + 1] = f end
nfacep.fields = all

local malformed = ProtoExpert.new("nfacep.malformed", "Malformed nfacep payload",
    expert.group.MALFORMED, expert.severity.ERROR)
local unknown_size = ProtoExpert.new("nfacep.size_unknown",
    "Tuple or record size unknown: no STATUS of this session seen (see the preferences)",
    expert.group.UNDECODED, expert.severity.NOTE)
nfacep.experts = { malformed, unknown_size }

nfacep.prefs.port = Pref.uint("UDP port", 5000, "The board's UDP port")
nfacep.prefs.tuple_bytes = Pref.uint("Tuple bytes", 0,
    "Bytes of a tuple; 0: learn them from the session's STATUS")
nfacep.prefs.record_bytes = Pref.uint("Record bytes", 0,
    "Bytes of a record; 0: learn them from the session's STATUS")

-- session id -> { tuple_bytes, record_bytes }, from STATUS packets
local sizes = {}
function nfacep.init()
    sizes = {}
end

local function size_of(session, which, pref)
    if pref ~= 0 then return pref end
    local known = sizes[session]
    return known and known[which] or nil
end

-- A TUPLES or RECORDS body: its count, then one item each.
local function items(tree, tvb, size, count_field, item_field, what)
    local body = tvb:len() - HEADER_BYTES
    if size == nil then
        tree:add_proto_expert_info(unknown_size)
        return
    end
    if body == 0 or body % size ~= 0 then
        tree:add_proto_expert_info(malformed,
            string.format("%d bytes are not whole %s of %d bytes", body, what, size))
        return
    end
    local n = math.floor(body / size)
    tree:add(count_field, tvb(HEADER_BYTES, body), n):set_generated()
    for k = 0, n - 1 do
        tree:add(item_field, tvb(HEADER_BYTES + k * size, size))
    end
    return n
end

local function status(tree, tvb, session)
    local at = HEADER_BYTES
    local need = 0
    for _, field in ipairs(STATUS_FIELDS) do need = need + field[2] end
    if tvb:len() < at + need then
        tree:add_proto_expert_info(malformed,
            string.format("a STATUS of %d bytes: its body has %d", tvb:len(), need))
        return
    end
    local values = {}
    for _, field in ipairs(STATUS_FIELDS) do
        local name, size = field[1], field[2]
        tree:add_le(status_fields[name], tvb(at, size))
        if size == 8 then
            values[name] = tvb(at, size):le_uint64()
        else
            values[name] = tvb(at, size):le_uint()
        end
        at = at + size
    end
    if tvb:len() > at then
        tree:add(pf.status_values, tvb(at))
    end
    sizes[session] = { tuple = values.tuple_bytes, record = values.record_bytes }
    return values
end

function nfacep.dissector(tvb, pinfo, tree)
    local length = tvb:len()
    if length < HEADER_BYTES then return 0 end
    pinfo.cols.protocol = "nfacep"
    local sub = tree:add(nfacep, tvb(), "nfacep UDP link")
    sub:add(pf.version, tvb(0, 1))
    sub:add(pf.type, tvb(1, 1))
    sub:add_le(pf.reserved, tvb(2, 2))
    sub:add_le(pf.seq, tvb(4, 4))
    sub:add_le(pf.engine_id, tvb(8, 4))
    sub:add_le(pf.session, tvb(12, 4))
    local version, ptype = tvb(0, 1):uint(), tvb(1, 1):uint()
    local seq, session = tvb(4, 4):le_uint(), tvb(12, 4):le_uint()
    local name = TYPES[ptype] or string.format("type 0x%02x", ptype)
    pinfo.cols.info = string.format("%s seq=%d session=%08x", name, seq, session)
    if version ~= VERSION then
        sub:add_proto_expert_info(malformed,
            string.format("payload format version %d; this dissector reads %d", version, VERSION))
        return length
    end
    local body = length - HEADER_BYTES
    local info
    if ptype == 0x01 then
        local n = items(sub, tvb, size_of(session, "tuple", nfacep.prefs.tuple_bytes),
            pf.tuples, pf.tuple, "tuples")
        if n then info = string.format(", %d tuples", n) end
    elseif ptype == 0x81 then
        local n = items(sub, tvb, size_of(session, "record", nfacep.prefs.record_bytes),
            pf.records, pf.record, "records")
        if n then info = string.format(", %d records", n) end
    elseif ptype == 0x82 then
        local v = status(sub, tvb, session)
        if v then info = string.format(", tuples=%d records=%d", v.tuples, v.records) end
    elseif ptype == 0x04 then
        if body <= SWITCH_BYTES then
            sub:add_proto_expert_info(malformed, "a PARAMS packet without values")
        else
            sub:add_le(pf.switch_from, tvb(HEADER_BYTES, SWITCH_BYTES))
            sub:add(pf.switch_values, tvb(HEADER_BYTES + SWITCH_BYTES))
        end
    elseif ptype == 0x06 then
        if body < LOAD_HEADER_BYTES then
            sub:add_proto_expert_info(malformed, "a LOAD packet without its offset and flags")
        else
            sub:add_le(pf.load_offset, tvb(HEADER_BYTES, 4))
            sub:add(pf.load_last, tvb(HEADER_BYTES + 4, 1))
            if body > LOAD_HEADER_BYTES then
                sub:add(pf.load_bytes, tvb(HEADER_BYTES + LOAD_HEADER_BYTES))
                info = string.format(", offset=%d, %d bytes", tvb(HEADER_BYTES, 4):le_uint(),
                    body - LOAD_HEADER_BYTES)
            end
        end
    elseif COMMANDS[ptype] then
        if body ~= 0 then
            sub:add_proto_expert_info(malformed, string.format("%s with a body", name))
        end
    else
        sub:add_proto_expert_info(malformed, string.format("unknown type 0x%02x", ptype))
    end
    if info then pinfo.cols.info:append(info) end
    return length
end

local port_table = DissectorTable.get("udp.port")
local registered = nfacep.prefs.port
port_table:add(registered, nfacep)

function nfacep.prefs_changed()
    if registered ~= nfacep.prefs.port then
        port_table:remove(registered, nfacep)
        registered = nfacep.prefs.port
        port_table:add(registered, nfacep)
    end
end

local function heuristic(tvb, pinfo, tree)
    if tvb:len() < HEADER_BYTES then return false end
    if tvb(0, 1):uint() ~= VERSION or tvb(2, 2):uint() ~= 0 or not TYPES[tvb(1, 1):uint()] then
        return false
    end
    nfacep.dissector(tvb, pinfo, tree)
    return true
end
nfacep:register_heuristic("udp", heuristic)
